"""The tests' real servers, their common plumbing in one place (no pytest at import: the benches
use the server modules too).

Each real server a test uses (PostgreSQL: tests/pg_cluster.py, Dovecot: tests/dovecot_server.py,
Prometheus: tests/telemetry/prom_server.py, Alertmanager: tests/alertmanager.py, Chromium:
tests/browser_support.py, llama-cpp: tests/llm/llama_server.py) is started the same way, and
this module is that way:

- in a temp dir of its own (`make_dir`: its `owner.pid` names the process that made it, so a run
  killed before its teardown is swept by the next start, `sweep_orphans`);
- on a free loopback port (`free_port`);
- waited for on a condition (`wait_until`: the server answers, or fails at once when the process
  exits, with its log's tail), never on a sleep;
- stopped after (`stop_process`: SIGTERM, then SIGKILL past a deadline);
- where its binary is missing, its tests skip loudly (`require`: a reason saying how to install it,
  and the banner of `pytest_terminal_summary` at the end of the run, which reads the skip reports,
  so it works under xdist too), or fail where the run requires it (`AGENTD_REQUIRE_<NAME>=1`, set
  by `.ci/run`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Each server's skip reasons begin with its banner mark; the banner at the end of the run counts them.
BANNERS = {
    "POSTGRESQL TEST SKIPPED": "PostgreSQL",
    "DOVECOT TEST SKIPPED": "Dovecot",
    "PROMETHEUS TEST SKIPPED": "Prometheus",
    "ALERTMANAGER TEST SKIPPED": "Alertmanager",
    "REAL-BROWSER TEST SKIPPED": "real-browser",
    "REAL MODEL TEST SKIPPED": "real-model",
}
POLL_S = 0.02  # how often a wait looks again (a condition, never a fixed sleep's length)


def free_port() -> int:
    """A loopback port nothing listens on now (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a TCP connect to `host:port` is accepted now."""
    try:
        with socket.create_connection((host, port), 1):
            return True
    except OSError:
        return False


def http_ok(url: str) -> bool:
    """Whether a GET of `url` answers 200 now (a server's readiness endpoint)."""
    import httpx

    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(
    ready: Callable[[], bool],
    what: str,
    *,
    process: subprocess.Popen[Any] | None = None,
    log: Callable[[], str] = lambda: "",
    within_s: float = 60.0,
) -> None:
    """Until `ready()` holds; raises RuntimeError (with the log's tail) when `process` exits
    first or `within_s` passes (a deadline for a wedged start, not a timing assertion)."""
    deadline = time.monotonic() + within_s
    while not ready():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}):\n{log()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {within_s:.0f} s:\n{log()[-3000:]}")
        time.sleep(POLL_S)


def stop_process(process: subprocess.Popen[Any], within_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL when it has not exited within `within_s`; reaped either way."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def make_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new temp dir `prefix*` under `parent` (default the temp dir) that records its owner."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent or tempfile.gettempdir()))
    (root / "owner.pid").write_text(str(os.getpid()))
    return root


def sweep_orphans(parent: Path, prefix: str, stop: Callable[[Path], None]) -> None:
    """`stop(dir)` for each `prefix*` dir under `parent` whose owner process is gone (a run or
    bench killed before its teardown); `stop` removes the dir."""
    for root in parent.glob(f"{prefix}*"):
        try:
            owner = int((root / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being made
        if not alive(owner):
            stop(root)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie nobody reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stop_pid(pid: int, within_s: float = 20.0) -> None:
    """SIGTERM a process that is not our child (a dead run's server), then SIGKILL if it stays."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our own child (a test of this): reap it
        time.sleep(POLL_S)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def require(reason: str | None, name: str) -> None:
    """Nothing when `reason` is None (the server can run); else skip the test with `reason`, or
    fail it when AGENTD_REQUIRE_`name`=1. `reason` begins with a mark of BANNERS."""
    if reason is None:
        return
    import pytest

    variable = f"AGENTD_REQUIRE_{name}"
    if os.environ.get(variable) == "1":
        pytest.fail(reason.replace("SKIPPED", f"FAILED ({variable}=1)", 1), pytrace=False)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner per server whose tests were skipped: they cannot hide in the skip count. It reads
    the skip reports themselves, so it works under xdist, where the skips happen in the workers."""
    for mark, title in BANNERS.items():
        reasons: dict[str, int] = {}
        for report in terminalreporter.stats.get("skipped", []):
            longrepr = report.longrepr
            text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            if mark in text:
                reason = text[text.index(mark) :]
                reasons[reason] = reasons.get(reason, 0) + 1
        for reason, count in reasons.items():
            terminalreporter.write_sep("!", f"{count} {title} test(s) skipped", red=True, bold=True)
            terminalreporter.write_line(reason, red=True, bold=True)
