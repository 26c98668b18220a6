"""A daemon that holds the home but does not answer (SIGSTOPped) is told from one that runs:
`status`, `doctor` and `inbox approve` say it is not responding and what to do, an approval given
meanwhile is kept and runs once the daemon answers again. A real `agentd serve`, real signals."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.daemon import serve as daemon
from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.configs import FINISH, act, append_action, scripted_home
from tests.conftest import Home

AGENTD = [sys.executable, "-m", "agentd"]


def until(what: str, check: Callable[[], Any], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return value


def cli(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home.root), *args], capture_output=True, text=True, timeout=60
    )


def stopped(pid: int) -> bool:
    """The kernel has stopped the process (state T in /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def writable(db: Path) -> bool:
    """No transaction of the stopped daemon holds the write lock (it may stop inside one)."""
    con = sqlite3.connect(db, timeout=0.2)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def freeze(proc: subprocess.Popen[bytes], db: Path) -> None:
    """SIGSTOP the daemon at a moment it holds no write transaction."""
    for _ in range(50):
        proc.send_signal(signal.SIGSTOP)
        until("the daemon to stop", lambda: stopped(proc.pid))
        if writable(db):
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the daemon kept holding the write lock")


@pytest.fixture
def serving(home: Home, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real `agentd serve` whose run waits for an approval to append "hello" to a file."""
    out = tmp_path / "out.txt"
    home.write_config(
        scripted_home(["append"], rules='append = "approve"', tables=append_action(out)),
        [act("append", word="hello"), FINISH],
    )
    home.start_run(home.add_goal())
    log = home.root / "daemon.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*AGENTD, "--home", str(home.root), "serve"], stdout=sink, stderr=sink,
            env={**os.environ, "AGENTD_LOG_FORMAT": "json"}, start_new_session=True,
        )  # fmt: skip
    try:
        until("daemon.ready", lambda: '"daemon.ready"' in log.read_text() or proc.poll())
        assert proc.poll() is None, log.read_text()[-3000:]
        yield proc, out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def approval(home: Home) -> Any:
    items = home.store.read(lambda c: qi.list_items(c, status="open"))
    return next((i for i in items if i.kind == InboxKind.APPROVAL), None)


@pytest.mark.slow
@pytest.mark.timeout(180)  # seven CLI processes and a daemon, on a loaded machine
def test_a_stopped_daemon_is_not_responding_and_an_approval_waits_for_it(
    serving: tuple[subprocess.Popen[bytes], Path], home: Home
) -> None:
    proc, out = serving
    item = until("the approval item", lambda: approval(home))
    freeze(proc, home.paths.db)
    try:
        status = cli(home, "status")
        data = json.loads(cli(home, "status", "--json").stdout)
        doctor = cli(home, "doctor")
        approved = cli(home, "inbox", "approve", str(item.item_id))
        # Read while it is still stopped: once thawed it may consume the approval at once.
        kept = home.store.read(lambda c: qi.get_item(c, item.item_id))
    finally:
        proc.send_signal(signal.SIGCONT)
    assert "not responding" in status.stdout and f"kill -CONT {proc.pid}" in status.stdout
    assert data["daemon"] == {"up": True, "pid": proc.pid, "responding": False}
    assert re.search(r"^FAIL +daemon +not responding", doctor.stdout, re.M), doctor.stdout
    assert doctor.returncode == 1
    assert approved.returncode == 0, approved.stderr
    assert "continues within a second" not in approved.stdout
    assert "not responding" in approved.stdout and "answers again" in approved.stdout
    assert kept.status == InboxStatus.APPROVED  # nothing lost while it was stopped

    until("the approved action to run", lambda: out.exists() and "hello" in out.read_text())
    status = cli(home, "status")
    data = json.loads(cli(home, "status", "--json").stdout)
    doctor = cli(home, "doctor")
    assert f"up (pid {proc.pid})" in status.stdout and "not responding" not in status.stdout
    assert data["daemon"] == {"up": True, "pid": proc.pid, "responding": True}
    assert re.search(rf"^ok +daemon +running \(pid {proc.pid}\)$", doctor.stdout, re.M), (
        doctor.stdout
    )


# ── the probe itself, against sockets that behave as a stuck or a vanished daemon's would ──────
@pytest.fixture
def held(home: Home) -> Iterator[Home]:
    """A migrated home whose lock this test holds, as a daemon would (no daemon runs)."""
    home.write_config(scripted_home(["append"], tables=append_action(home.root / "out")), [])
    home.store  # noqa: B018  # migrates
    with daemon.home_lock(home.paths):
        yield home


def in_process(home: Home, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(home.root), *args])


def test_a_socket_that_accepts_but_never_answers_is_not_responding(held: Home) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stuck:
        stuck.bind(str(held.paths.api_sock))
        stuck.listen(8)  # the kernel queues connections; nobody accepts: a stopped loop
        data = json.loads(in_process(held, "status", "--json").stdout)
        doctor = in_process(held, "doctor").stdout
    assert data["daemon"] == {"up": True, "pid": os.getpid(), "responding": False}
    assert re.search(r"^FAIL +daemon +not responding", doctor, re.M), doctor


def test_a_stale_socket_leaves_the_lock_to_go_by(held: Home) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(held.paths.api_sock))  # the file stays; connecting is refused
    data = json.loads(in_process(held, "status", "--json").stdout)
    doctor = in_process(held, "doctor").stdout
    assert data["daemon"] == {"up": True, "pid": os.getpid()}  # up; not asked, so no verdict
    assert f"running (pid {os.getpid()}); not asked whether it answers" in doctor, doctor
    assert "refused" in doctor


def test_a_busy_daemon_that_answers_late_is_responding(held: Home) -> None:
    # Running, not stopped, answering only after the first ask gave up (a loaded machine, a long
    # parse on its loop): asked again, it answers — not "not responding", nor a doctor failure.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.bind(str(held.paths.api_sock))
        slow.listen(8)

        def answer_the_second_ask() -> None:
            first, _ = slow.accept()
            second, _ = slow.accept()  # the first ask gave up on its own and asked again
            first.close()
            with second:
                second.recv(4096)
                second.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")

        worker = threading.Thread(target=answer_the_second_ask, daemon=True)
        worker.start()
        data = json.loads(in_process(held, "status", "--json").stdout)
        worker.join(timeout=30)
    assert data["daemon"] == {"up": True, "pid": os.getpid(), "responding": True}, data
