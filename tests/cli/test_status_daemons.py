"""`agentd status` lists the daemons serving the database (agentd.operator.daemons): owner, host,
pid, version, runs held, last renewal and state — live ones first, stopped or silent ones only
from the last day — in text and in --json. On SQLite it is the home's one daemon, or none; on
PostgreSQL every daemon of every host, and a real `agentd serve` shows up live, then stopped
after SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import leases
from agentd.db import queries as q
from tests import processes
from tests.conftest import Home

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""
FINISH = {"action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
DAY_S = 86400.0


def status(home: Home, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--home", str(home.root), "status", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if "--json" in args else result.stdout


def register(home: Home, owner: str, *, pid: int, lease_s: float = 30.0, host: str = "h") -> None:
    home.store.write(
        lambda c: leases.register(
            c, owner=owner, host=host, pid=pid, version="9.9.9", lease_s=lease_s
        )
    )


def backdate(home: Home, owner: str, seconds: float) -> None:
    """Move a daemon's times `seconds` into the past (the database's clock cannot be waited on)."""
    home.store.write(
        lambda c: c.execute(
            "UPDATE daemons SET started_at = started_at - ?, renewed_at = renewed_at - ?,"
            " stopped_at = stopped_at - ? WHERE owner = ?",
            (seconds, seconds, seconds, owner),
        )
    )


def hold_runs(home: Home, owner: str, n: int) -> None:
    goal_id = home.add_goal()

    def work(c: Any) -> None:
        for _ in range(n):
            run_id = q.create_run(c, goal_id=goal_id, agent="default", trigger="test")
            leases.claim_run(c, run_id, owner, 30.0)

    home.store.write(work)


# ── SQLite: the one daemon, or none ──────────────────────────────────────────────────────────


def test_sqlite_home_never_served_lists_no_daemon(home: Home) -> None:
    home.write_config(CONFIG, [FINISH])
    home.store  # noqa: B018  # creates the database
    home.close()

    data = status(home, "--json")
    text = status(home)

    assert data["daemons"] == [] and data["database"] is None
    assert "OWNER" not in text and "daemons" not in text


def test_sqlite_home_lists_only_its_newest_daemon(home: Home) -> None:
    home.write_config(CONFIG, [FINISH])
    register(home, "h:100:old", pid=100)
    home.store.write(lambda c: leases.stopped(c, "h:100:old", release=True))
    backdate(home, "h:100:old", 60)
    register(home, "h:200:new", pid=200)
    hold_runs(home, "h:200:new", 2)
    home.close()

    (only,) = status(home, "--json")["daemons"]
    text = status(home)

    # No daemon holds the home's lock now: its newest start, never stopped, died (on SQLite
    # the lock says whether it runs; it renews nothing).
    assert only["owner"] == "h:200:new" and only["state"] == "silent" and only["runs_held"] == 2
    # The text shows no table on SQLite: the `daemon:` line says all there is (issue 33).
    assert "h:100:old" not in text and "h:200:new" not in text and "OWNER" not in text


# ── PostgreSQL: every daemon serving the database ────────────────────────────────────────────


@pytest.fixture
def pg_home(tmp_path: Path, pg_url: str) -> Any:
    h = Home(tmp_path / "home", pg_url)
    h.write_config(CONFIG, [FINISH])
    yield h
    h.close()


def test_postgres_lists_live_first_then_silent_then_stopped_from_the_last_day(
    pg_home: Home,
) -> None:
    home = pg_home
    register(home, "b:2:stopped", pid=2, host="b")
    home.store.write(lambda c: leases.stopped(c, "b:2:stopped", release=True))
    backdate(home, "b:2:stopped", 300)  # stopped 5 minutes ago
    register(home, "c:3:silent", pid=3, host="c", lease_s=30)
    backdate(home, "c:3:silent", 125)  # no renewal for 2 minutes: past its lease
    register(home, "d:4:gone", pid=4, host="d")
    home.store.write(lambda c: leases.stopped(c, "d:4:gone", release=True))
    backdate(home, "d:4:gone", 2 * DAY_S)  # stopped two days ago: not listed
    register(home, "e:5:old-silent", pid=5, host="e")
    backdate(home, "e:5:old-silent", DAY_S + 60)  # silent for more than a day: not listed
    register(home, "a:1:live", pid=1, host="a")
    hold_runs(home, "a:1:live", 3)
    home.store.write(lambda c: leases.renew(c, "a:1:live", 30.0))
    home.close()

    data = status(home, "--json")
    text = status(home)

    shown = [(d["owner"], d["state"], d["runs_held"]) for d in data["daemons"]]
    assert shown == [("a:1:live", "live", 3), ("c:3:silent", "silent", 0),
                     ("b:2:stopped", "stopped", 0)]  # fmt: skip
    live, silent, stopped = data["daemons"]
    assert live["host"] == "a" and live["pid"] == 1 and live["version"] == "9.9.9"
    assert live["renewed_s_ago"] < 30 and live["stopped_at"] is None
    assert 120 <= silent["renewed_s_ago"] < 180 and silent["lease_s"] == 30
    assert 290 <= stopped["stopped_s_ago"] < 360
    assert data["database"].startswith("postgresql://") and "daemons_not_listed" in data
    lines = text.splitlines()
    title = next(n for n, line in enumerate(lines) if line.startswith("daemons serving"))
    assert lines[title + 1].split() == ["OWNER", "HOST", "PID", "VERSION", "RUNS", "RENEWED",
                                        "CONFIG", "STATE"]  # fmt: skip
    rows = lines[title + 2 : title + 5]
    assert rows[0].startswith("a:1:live") and rows[0].rstrip().endswith("live")
    assert " 3 " in rows[0] and ("now" in rows[0] or "s ago" in rows[0])
    assert rows[1].startswith("c:3:silent") and "2m" in rows[1]
    assert rows[1].rstrip().endswith("silent past its 30s lease")
    # 5m, or 5m1s… when the machine took seconds between the backdating and the command
    assert rows[2].startswith("b:2:stopped")
    assert re.search(r"stopped 5m(\d+s)? ago$", rows[2].rstrip())
    assert "d:4:gone" not in text and "e:5:old-silent" not in text
    # This home runs no daemon of its own; another one serves the database.
    assert "daemon: not running here; 1 daemon serves the database" in text.replace("  ", " ")


def test_postgres_with_no_daemon_says_so(pg_home: Home) -> None:
    pg_home.store  # noqa: B018  # migrates the new database
    pg_home.close()

    data = status(pg_home, "--json")
    text = status(pg_home)

    assert data["daemons"] == []
    assert "none in the last day; start one with `agentd serve`" in text
    assert "nor anywhere on this database" in text


def start_daemon(home: Path) -> subprocess.Popen[bytes]:
    return processes.start(home, home / "daemon.log")


def wait_ready(proc: subprocess.Popen[bytes], home: Home, timeout_s: float = 40.0) -> None:
    """Until the daemon logs daemon.ready; fails at once when it exits instead."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if '"daemon.ready"' in _log(home):
            return
        time.sleep(0.05)
    raise AssertionError(f"the daemon is not ready (exit {proc.poll()}):\n{_log(home)[-3000:]}")


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_real_daemon_is_live_then_stopped_after_sigterm(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """On PostgreSQL the daemon renews its row; on SQLite it writes nothing while idle, and the
    home lock says it is live."""
    url = request.getfixturevalue("pg_url") if engine == "postgres" else None
    home = Home(tmp_path / "home", url)
    home.write_config(CONFIG, [FINISH])
    home.store  # noqa: B018  # migrates the new database
    home.close()
    proc = start_daemon(home.root)
    try:
        wait_ready(proc, home)

        (live,) = status(home, "--json")["daemons"]
        text = status(home)

        assert live["pid"] == proc.pid and live["state"] == "live"
        assert live["owner"].split(":")[1] == str(proc.pid)
        table = any(line.startswith(live["owner"]) and line.rstrip().endswith("live")
                    for line in text.splitlines())  # fmt: skip
        assert table == (engine == "postgres")  # on SQLite the daemon line says it all
        assert f"daemon: up (pid {proc.pid})" in text.replace("  ", " ")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, _log(home)[-3000:]

    (stopped,) = status(home, "--json")["daemons"]
    text = status(home)

    assert stopped["pid"] == proc.pid and stopped["state"] == "stopped"
    assert stopped["stopped_at"] is not None and stopped["runs_held"] == 0
    if engine == "sqlite":
        assert stopped["owner"] not in text
        return
    row = next(line for line in text.splitlines() if line.startswith(stopped["owner"]))
    assert "stopped" in row and ("now" in row or "s ago" in row)


def _log(home: Home) -> str:
    path = home.root / "daemon.log"
    return path.read_text() if path.exists() else ""
