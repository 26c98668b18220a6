"""Daemon processes for tests, in one place: `agentd serve` started as the console script runs
it (a fresh Python, JSON log lines appended to a file, a session of its own so it is killed whole
like systemd's cgroup), waited on by its `daemon.ready` line, stopped by SIGTERM, and — whatever a
test left running — killed and reaped at teardown by the `daemons` fixture.

Before this module each of six test modules had its own copy (tests/daemon/test_daemon.py's
`Daemon`, tests/runs/test_crash.py's `start_daemon`, tests/clock_home.py, tests/outer/
test_outer_daemon.py, tests/cli/test_status_daemons.py, tests/db/test_storage_faults.py); they
now call these, under their old names.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

AGENTD = [sys.executable, "-m", "agentd"]
READY = '"daemon.ready"'  # the line a daemon logs once it serves (JSON log lines)
READY_TIMEOUT_S = 40.0  # generous: a loaded machine starts Python slowly; failing fast on exit


def json_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a test daemon gets: JSON log lines (which tests read), plus `env`."""
    return {**os.environ, "AGENTD_LOG_FORMAT": "json", **(env or {})}


def start(
    home: Path, log: Path, *extra: str, env: Mapping[str, str] | None = None, **popen: Any
) -> subprocess.Popen[bytes]:
    """`agentd --home HOME serve EXTRA…`, its output appended to `log`; not waited on."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [*AGENTD, "--home", str(home), "serve", *extra],
            stdout=out, stderr=out, env=json_env(env),
            start_new_session=True,  # a process group, killed whole like systemd's cgroup
            **popen,
        )  # fmt: skip


def wait_ready(
    proc: subprocess.Popen[bytes] | None, log: Path, starts: int = 1,
    timeout_s: float = READY_TIMEOUT_S,
) -> None:  # fmt: skip
    """Until `log` holds `starts` daemon.ready lines; fails at once when `proc` exits instead."""
    deadline = time.monotonic() + timeout_s
    while log.read_text(errors="replace").count(READY) < starts:
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            code = None if proc is None else proc.poll()
            tail = log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"daemon did not become ready (exit {code}):\n{tail}")
        time.sleep(0.02)


def terminate(proc: subprocess.Popen[bytes], timeout_s: float = 20) -> int:
    """SIGTERM the daemon itself (not its children) and wait for its exit code."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout_s)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the daemon's whole process group and reap it (nothing left behind)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Daemons:
    """The daemon processes one test started; `kill_all` at teardown (the `daemons` fixture)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, home: Path, log: Path, *extra: str, **kw: Any) -> subprocess.Popen[bytes]:
        proc = start(home, log, *extra, **kw)
        self.procs.append(proc)
        return proc

    def serve(self, home: Path, log: Path, *extra: str, **kw: Any) -> subprocess.Popen[bytes]:
        """Start a daemon and wait until it serves (counting the ready lines already in `log`)."""
        before = log.read_text(errors="replace").count(READY) if log.exists() else 0
        proc = self.start(home, log, *extra, **kw)
        wait_ready(proc, log, before + 1)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            kill(proc)


@pytest.fixture
def daemons() -> Iterator[Daemons]:
    """Start daemons through this; each is killed (its whole group) and reaped after the test."""
    started = Daemons()
    try:
        yield started
    finally:
        started.kill_all()
