"""A flood of the `[api] port` cannot stall the daemon (issue 18, item 2): a real `agentd serve`
under a low open-file limit, a client holding hundreds of idle connections (and some that send
half a request, or no HTTP at all), and an approval given through the CLI (the unix socket) that
still executes at once; the daemon's descriptors stay bounded, its log stays quiet (one line per
kind of trouble), and the port answers after."""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import resource
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from tests.conftest import closed_port
from tests.daemon.test_daemon import FINISH, Daemon, act, cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

FILES = 256  # the daemon's hard open-file limit (and the soft one it raises itself to)
FLOOD = 300  # idle connections the attacker keeps open: more than the daemon may hold
HALF = 20  # connections that send half a request head, then nothing
GARBAGE = 50  # connections that send what is not HTTP (uvicorn warns of each)

CONFIG = """\
[daemon]
poll_interval_s = 0.05

[api]
port = {port}
safety_scan_s = 60

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.touch]
type = "command"
argv = ["touch", "{out}"]

[agents.default]
actions = ["touch", "finish"]
policy = {{ rules = {{ touch = "approve" }} }}
"""


class Limited(Daemon):
    """`agentd serve` started with RLIMIT_NOFILE lowered to (soft, FILES)."""

    soft = FILES // 2

    def start(self, **popen: Any) -> subprocess.Popen[bytes]:
        limits = (self.soft, FILES)
        return super().start(
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limits), **popen
        )


class Flood:
    """Keeps FLOOD idle TCP connections open to a port from a thread: each one the daemon closes
    is opened again, every REFILL_S. The first HALF sent half a request head and are not
    reopened: `half_open()` counts those the daemon has not closed yet."""

    REFILL_S = 0.5

    def __init__(self, port: int) -> None:
        self.address = ("127.0.0.1", port)
        self.half = [
            self._open(b"GET /api/inbox HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc") for _ in range(HALF)
        ]
        self.idle = [self._open() for _ in range(FLOOD)]
        self.garbage = [self._open(b"\x16\x03\x01 not HTTP\r\n\r\n") for _ in range(GARBAGE)]
        self.closed_by_server = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refill, daemon=True)
        self._thread.start()

    def _open(self, send: bytes = b"") -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(self.address)  # in progress while the backlog is full: never wait here
        if send:
            with contextlib.suppress(OSError):
                select.select([], [s], [], 1.0)
                s.send(send)
        return s

    @staticmethod
    def _gone(s: socket.socket) -> bool:
        """The server closed it (EOF or a reset), or it never connected."""
        try:
            return s.recv(1) == b""
        except BlockingIOError:
            return False
        except OSError as e:
            return e.errno != errno.ENOTCONN

    def _refill(self) -> None:
        while not self._stop.wait(self.REFILL_S):
            for i, s in enumerate(self.idle):
                if self._gone(s):
                    s.close()
                    self.closed_by_server += 1
                    self.idle[i] = self._open()

    def half_open(self) -> int:
        return sum(1 for s in self.half if s.fileno() != -1 and not self._gone(s))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in self.half + self.idle + self.garbage:
            s.close()


def files_open(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def soft_files_limit(pid: int) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if ln.startswith("Max open files"))  # fmt: skip
    return int(line.split()[3])


def tcp_get(port: int, path: str, token: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        return conn.getresponse().status
    finally:
        conn.close()


def until(what: str, check: Callable[[], Any], timeout_s: float) -> float:
    """Wait for `check`; returns how long it took."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.01)
    return time.monotonic() - started


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Limited]:
    d = Limited(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def test_api_flood_of_the_port_leaves_the_daemon_working(daemon: Limited) -> None:
    port = closed_port()
    out = daemon.home / "touched"
    daemon.home.mkdir(parents=True)
    (daemon.home / "replies.json").write_text(json.dumps([act("touch"), FINISH]))
    daemon.paths.config.write_text(CONFIG.format(port=port, out=out))
    proc = daemon.serve()
    assert soft_files_limit(proc.pid) == FILES  # raised to the hard limit at start
    run_id = daemon.new_run()
    daemon.until("the approval", lambda: daemon.open_items())
    (item,) = daemon.store.read(lambda c: qi.list_items(c, status="open"))
    lines_before = len(daemon.logs().splitlines())

    flood = Flood(port)
    try:
        peak = 0
        for _ in range(20):  # two refills: the flood is at its height
            peak = max(peak, files_open(proc.pid))
            time.sleep(0.05)
        approved = cli(daemon.home, "inbox", "approve", str(item.item_id))
        assert approved.returncode == 0, approved.stderr
        # Through the unix socket, while the port is flooded: the poke arrives, the run acts.
        took = until("the approved action", out.exists, timeout_s=1.0)
        assert "not responding" not in approved.stdout, approved.stdout
        peak = max(peak, files_open(proc.pid))
        until("the half-sent requests closed", lambda: flood.half_open() == 0, timeout_s=10)
        closed = flood.closed_by_server
    finally:
        flood.stop()
    logged = daemon.logs().splitlines()[lines_before:]

    assert took < 1.0
    assert peak < FILES - 64, f"the daemon held {peak} of its {FILES} descriptors"
    assert closed > 0  # the daemon closed what it would not hold
    assert len(logged) < 40, "\n".join(logged[:40])
    assert sum("Invalid HTTP request" in line for line in logged) == 1  # repeats held back
    token = daemon.paths.api_token.read_text().strip()
    until("the port answers", lambda: _answers(port, token), timeout_s=3)
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.terminate(proc)[0] == 0


def _answers(port: int, token: str) -> bool:
    try:
        return tcp_get(port, "/api/daemon", token) == 200
    except OSError:
        return False
