"""`agentd doctor` logs in to an imap source (read-only, a real Dovecot) and says whether IDLE is
offered and how big the mailbox is; a wrong password is named, never printed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd.cli import app
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
