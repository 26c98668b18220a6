"""`agentd doctor` logs in to an imap source (read-only) and says whether IDLE is offered and how
big the mailbox is; the mail config's mistakes are one clear sentence; the harness gates a reply
that would be sent (pure: no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd import config
from agentd.cli import app
from agentd.config.mail import MailReplyAction
from agentd.errors import ConfigError
from agentd.harness import mail as gate
from agentd.models import Verdict
from tests.conftest import Home
from tests.dovecot import imap_source
from tests.dovecot_server import Dovecot, message

BASE = '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'


def doctor(home: Home) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["--home", str(home.root), "doctor", "--json"])
    report = json.loads(result.stdout[result.stdout.find("{\n") :])
    return {c["name"]: c for c in report["checks"]}


@pytest.mark.timeout(60)
def test_doctor_logs_in_and_says_idle_and_size(home: Home, dovecot: Dovecot) -> None:
    dovecot.deliver(message("one"))
    dovecot.deliver(message("two"))
    agent = '[agents.default]\nactions = ["finish"]\nsources = ["inbox"]\n'
    home.write_config(BASE + imap_source(dovecot) + agent, [])
    home.store  # noqa: B018  # creates and migrates the database
    home.close()
    home._store = None
    check = doctor(home)["source inbox"]
    assert check["ok"], check
    assert "logged in (read-only); INBOX: 2 messages (2 unseen" in check["message"]
    assert "IDLE offered" in check["message"]
    assert " MB)" in check["message"]


@pytest.mark.timeout(60)
def test_doctor_names_a_wrong_password(home: Home, dovecot: Dovecot, monkeypatch: Any) -> None:
    monkeypatch.setenv("AGENTD_TEST_IMAP_PASSWORD", "not-it")
    agent = '[agents.default]\nactions = ["finish"]\nsources = ["inbox"]\n'
    home.write_config(BASE + imap_source(dovecot) + agent, [])
    check = doctor(home)["source inbox"]
    assert not check["ok"]
    assert "LOGIN refused" in check["message"] and "not-it" not in check["message"]


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


def reply(**keys: Any) -> MailReplyAction:
    return MailReplyAction.model_validate({"type": "mail_reply", "source": "inbox", **keys})


ARGS = {"message_id": "<a@b.c>", "to": ["bob@example.com"], "subject": "Re", "body": "x"}


def test_gate_a_draft_is_the_policy_alone() -> None:
    assert gate.gate(reply(), ARGS, Verdict.ALLOW, "default")[0] == Verdict.ALLOW


def test_gate_a_drafts_only_action_never_sends() -> None:
    verdict, rule = gate.gate(reply(), {**ARGS, "send": True}, Verdict.ALLOW, "default")
    assert verdict == Verdict.DENY and "only saves drafts" in rule


def test_gate_recipient_outside_allow_list_needs_approval() -> None:
    cfg = reply(send=True, smtp="relay", allow_recipients=["*@example.com"])
    inside = gate.gate(cfg, {**ARGS, "send": True}, Verdict.ALLOW, "default")
    assert inside[0] == Verdict.ALLOW
    outside = {**ARGS, "send": True, "to": ["bob@example.com", "x@evil.example"]}
    verdict, rule = gate.gate(cfg, outside, Verdict.ALLOW, "default")
    assert verdict == Verdict.APPROVE and "x@evil.example" in rule and "bob@" not in rule
    assert gate.gate(cfg, outside, Verdict.DENY, "policy")[0] == Verdict.DENY
