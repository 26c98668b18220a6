"""The daemon handled as `systemctl` users expect: `agentd serve --detach` returns once the
daemon serves (its pid in agentd.lock, its log in agentd.log), `agentd stop` stops it and waits,
and `--log-format console|json` picks the log lines whatever stderr is. Real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.cli.root import daemon_pid
from tests import processes
from tests.daemon.test_daemon import AGENTD, FINISH, Daemon

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def agentd(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home), *args], capture_output=True, text=True, timeout=90
    )


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    d.write([FINISH])
    yield d
    pid = daemon_pid(d.paths)  # a detached daemon is no child of the test: its pid, if left
    if pid is not None and pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    d.kill_all()


def test_serve_detach_returns_once_it_serves_and_stop_waits_for_it(daemon: Daemon) -> None:
    started = agentd(daemon.home, "serve", "--detach")
    assert started.returncode == 0, started.stderr
    pid = daemon_pid(daemon.paths)
    assert pid is not None and f"(pid {pid}) serves" in started.stdout
    assert daemon.paths.lock.read_text().strip() == str(pid)
    again = agentd(daemon.home, "serve", "--detach")
    assert again.returncode == 1 and f"already serves {daemon.home}" in again.stderr
    stopped = agentd(daemon.home, "stop")
    assert stopped.returncode == 0 and f"stopped the daemon (pid {pid})" in stopped.stdout
    assert daemon_pid(daemon.paths) is None  # gone when stop returns, not later
    events = [json.loads(x)["event"] for x in (daemon.home / "agentd.log").read_text().splitlines()]
    assert events[-1] == "daemon.stopped"


def test_stop_with_no_daemon_says_so_and_exits_0(daemon: Daemon) -> None:
    done = agentd(daemon.home, "stop")
    assert (done.returncode, done.stdout.strip()) == (0, f"agentd: no daemon serves {daemon.home}")


def test_serve_log_format_console_writes_readable_lines_to_a_file(
    daemon: Daemon, daemons: processes.Daemons
) -> None:
    out = daemon.home / "console.log"
    proc = daemons.start(daemon.home, out, "--log-format", "console")
    try:
        while "daemon.ready" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
    finally:
        assert agentd(daemon.home, "stop").returncode == 0
    ready = next(x for x in out.read_text().splitlines() if "daemon.ready" in x)
    assert not ready.startswith("{")  # a console line, not JSON, though stderr is a file


def test_serve_log_format_refuses_another_format(daemon: Daemon) -> None:
    done = agentd(daemon.home, "serve", "--log-format", "xml")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "agentd: --log-format 'xml' is neither console nor json; pick one of them"
    )
