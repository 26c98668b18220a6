"""docs/mail.md's walkthrough as written, against a real Dovecot: its config block (host, port and
TLS pointed at the test server, a scripted model) passes doctor, and a new mail starts the triage
run, which flags and drafts as the docs say. config.example.toml's commented mail block loads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import queries as q
from agentd.models import RunStatus
from tests.configs import FINISH, act
from tests.conftest import Home, wait_for
from tests.dovecot import PASSWORD_ENV
from tests.dovecot_server import Dovecot, message
from tests.mail_support import folder

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def walkthrough_config(server: Dovecot) -> str:
    doc = (ROOT / "docs/mail.md").read_text()
    block = doc.split("<!-- mail-walkthrough-config -->", 1)[1]
    toml = re.search(r"```toml\n(.*?)```", block, re.S)
    assert toml is not None
    text = re.sub(r"(?m)^   ", "", toml.group(1))
    text = text.replace(
        'host = "imap.example.com"', f'host = "{server.host}"\nport = {server.port}\ntls = "none"'
    )
    text = text.replace('user = "me@example.com"', f'user = "{server.user}"')
    text = text.replace('password_env = "IMAP_PASSWORD"', f'password_env = "{PASSWORD_ENV}"')
    scripted = (
        '[daemon]\npoll_interval_s = 0.02\n\n[models.default]\nprovider = "scripted"\n'
        'replies = "replies.json"\n\n'
    )
    return scripted + text


async def test_walkthrough_triage_runs_as_written(home: Home, dovecot: Dovecot, serve: Any) -> None:
    replies = [
        act("flag", message_id="<today@example.com>", flag="flagged"),
        act("reply", message_id="<today@example.com>", to=["alice@example.com"],
            subject="Re: the report", body="I will send it by five."),
        FINISH,
    ]  # fmt: skip
    home.write_config(walkthrough_config(dovecot), replies=replies)
    home.store.write(lambda c: q.add_goal(c, title="Keep my inbox to what needs me", why="tests",
                                          agent="mail", criteria=[], deadline=None))  # fmt: skip
    await serve()
    cursor = "SELECT 1 FROM meta WHERE key = 'imap_cursor:inbox'"
    await wait_for(lambda: home.store.read(lambda c: c.execute(cursor).fetchone()) is not None, 30)
    dovecot.deliver(message("the report", "Can I have it today?", message_id="<today@example.com>"))
    await wait_for(lambda: bool(home.store.read(lambda c: q.list_runs(c))), 30)
    (run,) = home.store.read(lambda c: q.list_runs(c))
    await wait_for(lambda: home.run(run.run_id).status == RunStatus.SUCCEEDED, 30)
    (mail,) = await folder(dovecot, "INBOX")
    assert "\\Flagged" in mail["flags"]
    (draft,) = await folder(dovecot, "Drafts")
    assert draft["excerpt"] == "I will send it by five."


def test_config_example_mail_block_loads(tmp_path: Path) -> None:
    text = (ROOT / "config.example.toml").read_text()
    block = text.split("# ── mail:", 1)[1]
    block = block[block.index("# [sources.inbox]") :]  # the prose before it is not TOML
    block = block.split("# ── ", 1)[0]  # up to the next section of the file
    lines = [line[2:] for line in block.splitlines() if line.startswith("# ") or line == "#"]
    uncommented = "\n".join(lines)
    tomllib.loads(uncommented)
    path = tmp_path / "config.toml"
    path.write_text('[models.default]\nprovider = "scripted"\nreplies = "r.json"\n\n' + uncommented)
    cfg = config.load(path)
    assert cfg.sources["inbox"].type == "imap"
    assert cfg.agents["mail"].triggers == ["inbox.received"]
