"""`agentd doctor` from a shell that lacks the daemon's environment (issue 19, item 5): a secret
the running daemon holds is "cannot check from here; the daemon sees it" (asked over its socket,
yes or no, never the value), so a channel's real delivery error shows instead of a FAIL about the
shell; one neither holds still fails. Real `agentd serve` and `agentd doctor` processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import InboxKind
from agentd.operator import control
from tests.conftest import closed_port
from tests.daemon.test_daemon import Daemon, cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CONFIG = """\
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "template"

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "AGENTD_TEST_DAEMON_KEY"

[models.other]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "AGENTD_TEST_NOWHERE_KEY"

[notify.ops]
type = "webhook"
url = "http://127.0.0.1:{port}/hook"
secret_env = "AGENTD_TEST_DAEMON_WHSEC"
retry_base_s = 60

[agents.default]
actions = ["finish"]
checkin = {{ quiet = "none" }}

[agents.default.notify]
channels = ["ops"]
on = ["question"]
"""


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    """A daemon whose environment holds two secrets this test's shell then lacks."""
    d = Daemon(tmp_path / "home")
    d.home.mkdir()
    d.paths.config.write_text(CONFIG.format(port=closed_port()))
    monkeypatch.setenv("AGENTD_TEST_DAEMON_KEY", "sk-never-shown")
    monkeypatch.setenv("AGENTD_TEST_DAEMON_WHSEC", SECRET)
    monkeypatch.delenv("AGENTD_TEST_NOWHERE_KEY", raising=False)
    try:
        d.serve()
        monkeypatch.delenv("AGENTD_TEST_DAEMON_KEY")  # the operator's login shell
        monkeypatch.delenv("AGENTD_TEST_DAEMON_WHSEC")
        yield d
    finally:
        d.kill_all()


def doctor(home: Path) -> tuple[int, dict[str, Any], str]:
    done = cli(home, "doctor", "--json")
    start = done.stdout.find("{\n")
    checks = {c["name"]: c for c in json.loads(done.stdout[start:])["checks"]}
    return done.returncode, checks, done.stdout + done.stderr


def test_doctor_secret_only_the_daemon_has_is_checked_by_asking_it(daemon: Daemon) -> None:
    code, checks, out = doctor(daemon.home)

    claude = checks["model claude"]
    assert claude["ok"], claude
    assert "cannot check from here; the daemon sees it" in claude["message"]
    other = checks["model other"]  # set neither here nor there: still a failure
    assert not other["ok"] and other["required"]
    assert "neither here nor in the running daemon's environment" in other["message"]
    assert code == 1
    assert "sk-never-shown" not in out and SECRET not in out


def test_doctor_shows_the_real_delivery_error_not_the_shells_missing_secret(
    daemon: Daemon,
) -> None:
    def work(c: Any) -> int:
        goal_id = q.add_goal(c, title="g", why="t", agent="default", criteria=[], deadline=None)
        return qi.post(c, InboxKind.QUESTION, title="which region?", goal_id=goal_id)

    daemon.store.write(work)
    daemon.until(
        "a delivery attempt",
        lambda: daemon.store.read(
            lambda c: c.execute("SELECT count(*) FROM outbox WHERE attempts > 0").fetchone()[0]
        ),
    )

    _code, checks, out = doctor(daemon.home)

    ops = checks["notify ops"]
    assert not ops["ok"] and "failing, 1 message(s) waiting to retry" in ops["message"], ops
    assert "127.0.0.1" in ops["message"] and "is not set" not in ops["message"]
    assert "$AGENTD_TEST_DAEMON_WHSEC: cannot check from here; the daemon sees it" in ops["message"]
    assert SECRET not in out


def test_the_daemon_answers_only_for_names_its_config_reads(daemon: Daemon) -> None:
    seen = control.daemon_sees(daemon.paths, ["PATH", "AGENTD_TEST_DAEMON_KEY", "HOME"])

    assert seen == {"AGENTD_TEST_DAEMON_KEY": True, "HOME": None, "PATH": None}


def test_doctor_without_a_daemon_says_the_shell_lacks_the_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG.format(port=closed_port()))

    _code, checks, _out = doctor(home)

    assert checks["model claude"]["message"].endswith(
        "$AGENTD_TEST_DAEMON_KEY is not set in this environment"
    )
