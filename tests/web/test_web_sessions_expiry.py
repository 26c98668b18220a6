"""`agentd web sessions` says when each session really ends if nobody uses it again: twelve hours
after it was last seen (what the daemon checks), never later than seven days after the login."""

from __future__ import annotations

import json
import time
from datetime import datetime

from typer.testing import CliRunner

from agentd.cli import app
from agentd.operator import sessions
from agentd.web import auth
from tests.conftest import Home


def test_web_sessions_expires_is_the_idle_cutoff(home: Home) -> None:
    home.root.mkdir(parents=True)
    token = auth.token(home.paths.api_token)
    seen = time.time() - 3600  # logged in and last used an hour ago
    sessions.login(home.store, token, "phone", now=seen)
    runner = CliRunner()
    listed = runner.invoke(app, ["--home", str(home.root), "web", "sessions", "--json"])
    assert listed.exit_code == 0, listed.output
    (found,) = json.loads(listed.stdout)
    ends = datetime.fromisoformat(found["expires_at"]).timestamp()
    assert abs(ends - (seen + sessions.IDLE_S)) < 1, (found, seen)
    login_ends = datetime.fromisoformat(found["login_expires_at"]).timestamp()
    assert abs(login_ends - (seen + sessions.LIFETIME_S)) < 1, found
    shown = runner.invoke(app, ["--home", str(home.root), "web", "sessions"])
    assert shown.exit_code == 0 and "phone" in shown.stdout, shown.output
    assert "(in 10h59m)" in shown.stdout or "(in 10h58m)" in shown.stdout, shown.stdout
