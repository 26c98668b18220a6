"""The mail config's mistakes are one clear sentence each; an imap source's port follows its TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd import config
from agentd.errors import ConfigError

BASE = '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'


def parse(tmp_path: Path, text: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(BASE + text)
    return config.load(path)


IMAP = '[sources.inbox]\ntype = "imap"\nhost = "{host}"\nuser = "me"\npassword_env = "PW"\n{more}\n'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (IMAP.format(host="mail.example.com", more='tls = "none"'), 'tls = "none" sends the password'),
        (IMAP.format(host="mail.example.com", more='password_env = "hunter2 x"').replace(
            'password_env = "PW"\n', ""), "NAME of an environment variable"),
        (IMAP.format(host="127.0.0.1", more="")
         + '[actions.reply]\ntype = "mail_reply"\nsource = "inbox"\nsend = true\n',
         'send = true needs smtp = "CHANNEL"'),
        ('[actions.move]\ntype = "mail_move"\nsource = "nothere"\n', "not an imap source"),
        (IMAP.format(host="127.0.0.1", more="")
         + '[agents.default]\nactions = ["finish"]\ntriggers = ["inbox.arrived"]\n',
         "emits inbox.received, inbox.reset"),
    ],
)  # fmt: skip
def test_mail_config_mistakes_are_one_sentence(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        parse(tmp_path, text)
    assert said in str(err.value)


def test_imap_port_follows_tls(tmp_path: Path) -> None:
    cfg = parse(tmp_path, IMAP.format(host="mail.example.com", more=""))
    assert cfg.sources["inbox"].port == 993  # type: ignore[union-attr]
    cfg = parse(tmp_path, IMAP.format(host="mail.example.com", more='tls = "starttls"'))
    assert cfg.sources["inbox"].port == 143  # type: ignore[union-attr]
