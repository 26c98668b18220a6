"""A reload does not start, stop or change a mail follower (they start with the daemon): the
reload says so, naming each imap source some agent uses that was added, removed or changed."""

from __future__ import annotations

from pathlib import Path

from agentd import config
from agentd.daemon.serve import needs_restart

BASE = '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
IMAP = (
    '[sources.{name}]\ntype = "imap"\nhost = "127.0.0.1"\ntls = "none"\nuser = "me"\n'
    'password_env = "PW"\n{more}\n'
)
AGENT = '[agents.default]\nactions = ["finish"]\nsources = [{used}]\n'


def parse(tmp_path: Path, text: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(BASE + text)
    return config.load(path)


def test_reload_says_which_mail_followers_need_a_restart(tmp_path: Path) -> None:
    one = parse(tmp_path, IMAP.format(name="inbox", more="") + AGENT.format(used='"inbox"'))
    assert needs_restart(one, one) == []
    moved = parse(tmp_path, IMAP.format(name="inbox", more='mailbox = "Work"')
                  + AGENT.format(used='"inbox"'))  # fmt: skip
    assert needs_restart(one, moved) == ["[sources.inbox] (its mail follower)"]
    two = parse(tmp_path, IMAP.format(name="inbox", more="") + IMAP.format(name="work", more="")
                + AGENT.format(used='"inbox", "work"'))  # fmt: skip
    assert needs_restart(one, two) == ["[sources.work] (its mail follower)"]
    assert needs_restart(two, one) == ["[sources.work] (its mail follower)"]
    unused = parse(tmp_path, IMAP.format(name="inbox", more="") + IMAP.format(name="work", more="")
                   + AGENT.format(used='"inbox"'))  # fmt: skip
    assert needs_restart(one, unused) == []  # a source no agent uses is not followed
