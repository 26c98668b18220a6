"""Storage faults as an operator meets them (issue 18, item 7), on a real small filesystem.

A home on a small tmpfs that fills up: a CLI write (whether the WAL cannot grow or SQLite finds
no room for its -shm) and `agentd serve` say the disk is full and to free space, in one sentence
with no traceback, and nothing is half-written; a daemon whose disk fills under it exits with a
note that says the same, not "restore a backup". A read-only mount and a held lock say so too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import faults
from agentd.db.sqlite import faults as sqlite_faults
from tests import processes
from tests.daemon.test_daemon import one_clear_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

AGENTD = [sys.executable, "-m", "agentd"]
DISK_BYTES = 8 << 20
WATCHED = """\
[daemon]
poll_interval_s = 0.05
watchdog_interval_s = 0.2

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.log]
type = "file_tail"
path = "__LOG__"

[agents.default]
sources = ["log"]
actions = ["finish"]
watch = { interval_s = 0.05 }

[agents.default.checkin]
enabled = false
"""


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None or os.geteuid() != 0:
        pytest.skip(f"NOT TESTED: the storage-fault tests need root and `{name}` to mount a tmpfs")
    return found


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 8 MiB tmpfs, unmounted afterwards (lazily, should a process still hold it)."""
    mount, umount = tool("mount"), tool("umount")
    where = tmp_path / "disk"
    where.mkdir()
    options = f"size={DISK_BYTES},mode=0755"
    mounted = subprocess.run(
        [mount, "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"NOT TESTED: cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run([umount, str(where)], capture_output=True).returncode != 0:
            subprocess.run([umount, "-l", str(where)], check=True)


def make_home(disk: Path) -> Path:
    home = disk / "home"
    done = CliRunner().invoke(app, ["--home", str(home), "init"])  # in-process: it only arranges
    assert done.exit_code == 0, done.output
    return home


def fill(disk: Path) -> Path:
    """Write a filler file until not one more byte fits on the filesystem."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as full:  # really full, or the test proves nothing
        (disk / "probe").write_bytes(b"x")
    assert full.value.errno == errno.ENOSPC
    return filler


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home), *args], capture_output=True, text=True, timeout=60
    )


def goals(home: Path) -> list[str]:
    done = cli(home, "goal", "list", "--json")
    assert done.returncode == 0, done.stderr
    return [g["title"] for g in json.loads(done.stdout)]


def says_disk_full(message: str, disk: Path) -> None:
    assert "disk is full" in message and "free space" in message, message
    assert f"df -h {disk / 'home'}" in message, message  # where to look
    assert "backup" not in message and "corrupt" not in message, message


def hold_open(db: Path) -> sqlite3.Connection:
    """Another connection that keeps the database open, as a running daemon does: its -wal and
    -shm stay (so a write needs the WAL to grow, not a new -shm)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("SELECT count(*) FROM goals").fetchone()
    assert db.with_name(db.name + "-shm").exists()
    return conn


# ── a CLI write on a full disk ───────────────────────────────────────────────────────────────
def test_a_cli_write_when_the_wal_cannot_grow_says_the_disk_is_full(disk: Path) -> None:
    home = make_home(disk)
    holder = hold_open(home / "agentd.db")
    try:
        filler = fill(disk)
        done = cli(home, "goal", "add", "on a full disk", "--why", "tests")
    finally:
        holder.close()
    assert done.returncode == 1, done.stdout
    says_disk_full(one_clear_line(done.stderr), disk)
    filler.unlink()  # space again: the refused write left nothing behind, and writes work
    assert goals(home) == []
    assert cli(home, "goal", "add", "after", "--why", "tests").returncode == 0
    assert goals(home) == ["after"]


def test_a_cli_command_with_no_room_for_the_shm_file_says_the_disk_is_full(disk: Path) -> None:
    home = make_home(disk)
    filler = fill(disk)  # nothing holds the database open: SQLite must make its -shm anew
    written = cli(home, "goal", "add", "on a full disk", "--why", "tests")
    assert written.returncode == 1, written.stdout
    says_disk_full(one_clear_line(written.stderr), disk)
    read = cli(home, "goal", "list")  # even a read needs the -shm of a WAL database
    assert read.returncode == 1, read.stdout
    says_disk_full(one_clear_line(read.stderr), disk)
    filler.unlink()
    assert goals(home) == []


# ── the daemon on a full disk ────────────────────────────────────────────────────────────────
def serve(home: Path, log: Path) -> subprocess.Popen[bytes]:
    """`agentd serve`, logging beside the disk (a log on the full disk could say nothing)."""
    return processes.start(home, log)


@contextlib.contextmanager
def stopped(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.parametrize("served_before", [False, True])
def test_serve_on_a_full_disk_says_to_free_space(
    disk: Path, tmp_path: Path, served_before: bool
) -> None:
    home = make_home(disk)
    if served_before:  # its pid file is there to rewrite: the database is what cannot grow
        (home / "agentd.lock").write_text("0\n")
    fill(disk)
    log = tmp_path / "serve.log"
    with stopped(serve(home, log)) as proc:
        code = proc.wait(timeout=30)
    assert code == 1, log.read_text()
    says_disk_full(one_clear_line(log.read_text()), disk)


def test_a_daemon_whose_disk_fills_exits_with_a_note_to_free_space(
    disk: Path, tmp_path: Path
) -> None:
    home = make_home(disk)
    (tmp_path / "app.log").write_text("started\n")  # the watched source: a look every 0.05 s
    (home / "config.toml").write_text(WATCHED.replace("__LOG__", str(tmp_path / "app.log")))
    log = tmp_path / "serve.log"
    with stopped(serve(home, log)) as proc:
        deadline = time.monotonic() + 30
        while '"daemon.ready"' not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        fill(disk)  # each look is a write that no longer fits
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the daemon kept failing on a full disk:\n{log.read_text()[-3000:]}")
    assert code == 1
    failing = [
        json.loads(line)
        for line in log.read_text().splitlines()
        if '"daemon.database_failing"' in line
    ]
    assert len(failing) == 1, log.read_text()[-3000:]
    assert "disk is full" in failing[0]["error"], failing[0]
    note = failing[0]["note"]
    assert "free space" in note and f"df -h {home}" in note, note
    assert "backup" not in note and "corrupt" not in note, note


# ── a read-only filesystem, a held lock ──────────────────────────────────────────────────────
def test_a_home_on_a_read_only_mount_says_to_remount_it(disk: Path, tmp_path: Path) -> None:
    home = make_home(disk)
    subprocess.run([tool("mount"), "-o", "remount,ro", str(disk)], check=True)
    written = cli(home, "goal", "add", "on a read-only disk", "--why", "tests")
    assert written.returncode == 1, written.stdout
    message = one_clear_line(written.stderr)
    assert "read-only" in message and "remount" in message, message
    assert "for this user" not in message, message  # root is not the cause: the mount is
    log = tmp_path / "serve.log"
    with stopped(serve(home, log)) as proc:
        assert proc.wait(timeout=30) == 1, log.read_text()
    message = one_clear_line(log.read_text())
    assert "read-only" in message and "remount" in message, message
    assert goals(home) == []  # reads still work there


def test_a_write_while_another_process_holds_the_lock_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert CliRunner().invoke(app, ["--home", str(home), "init"]).exit_code == 0
    holder = sqlite3.connect(home / "agentd.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # e.g. an sqlite3 shell left inside a transaction
    try:
        done = cli(home, "goal", "add", "while locked", "--why", "tests")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 1, done.stdout
    message = one_clear_line(done.stderr)
    assert "locked" in message and "retry" in message and "fuser" in message, message


# ── the words for an I/O error that is not the disk filling ──────────────────────────────────
def test_an_io_error_on_a_disk_with_room_points_at_the_device(tmp_path: Path) -> None:
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = 10 | (3 << 8)  # SQLITE_IOERR_WRITE, as SQLite raises it
    assert sqlite_faults.classify(error, tmp_path / "agentd.db") is faults.Fault.IO
    message = sqlite_faults.sentence(error, tmp_path / "agentd.db")
    assert "journalctl -k" in message and "full" not in message, message
