"""`agentd backup` (issue 10, item 7): a consistent copy while a daemon writes, taken with SQLite's
online backup API; an existing file is kept unless --force; the copy (or any copy of a home) can be
read with the read commands from a read-only place, and a write there says "read-only"."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.db import queries as q
from agentd.db.sqlite import schema
from agentd.db.store import SyncStore
from tests.daemon.test_daemon import FINISH, Daemon, one_clear_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

AGENTD = [sys.executable, "-m", "agentd"]


def cli(home: Path, *args: str, user: bool = False) -> subprocess.CompletedProcess[str]:
    """`agentd --home HOME …`; with `user`, as an unprivileged user when we are root (root may
    write through file modes, so a read-only copy is only read-only to someone else)."""
    prefix: list[str] = []
    if user and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a read-only place")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run(
        [*prefix, *AGENTD, "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def add_goal_and_run(c: Any, i: int) -> None:
    """One transaction, two rows: a consistent copy has as many goals as runs."""
    goal_id = q.add_goal(c, title=f"g{i}", why="tests", agent="default", criteria=[], deadline=None)
    q.create_run(c, goal_id=goal_id, agent="default", trigger="test")


def test_backup_while_a_daemon_writes_is_consistent(daemon: Daemon, tmp_path: Path) -> None:
    daemon.write([FINISH] * 2000)
    daemon.serve()
    stop = threading.Event()
    written = [0]

    def writer() -> None:  # the CLI's writes, while the daemon runs and journals each run
        store = SyncStore(daemon.paths.db)
        while not stop.is_set():
            store.write(lambda c: add_goal_and_run(c, written[0]))
            written[0] += 1
        store.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        daemon.until("the writer to start", lambda: written[0] >= 5)
        daemon.until("some runs to finish", lambda: daemon.run(1).status.finished)
        target = tmp_path / "backups" / "agentd-today.db"
        target.parent.mkdir()
        done = cli(daemon.home, "backup", str(target), "--json")
    finally:
        stop.set()
        thread.join(20)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["path"] == str(target) and made["integrity"] == "ok"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # one file

    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # no -wal needed
    tables = ("goals", "runs", "steps", "inbox", "events")
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}  # noqa: S608
    assert counts == made["counts"]
    assert counts["goals"] == counts["runs"] > 0  # no transaction half in the copy
    finished = conn.execute("SELECT count(*) FROM runs WHERE status = 'succeeded'").fetchone()[0]
    assert finished > 0 and counts["steps"] > 0  # the daemon's own writes are in it
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(schema.MIGRATIONS)
    conn.close()


def test_backup_refuses_an_existing_file_unless_forced(daemon: Daemon, tmp_path: Path) -> None:
    daemon.write([FINISH])
    assert cli(daemon.home, "init").returncode == 0
    target = tmp_path / "copy.db"
    target.write_text("an older backup, or something else entirely\n")
    refused = cli(daemon.home, "backup", str(target))
    assert refused.returncode == 1
    assert "already exists" in one_clear_line(refused.stderr)
    assert target.read_text().startswith("an older backup")
    forced = cli(daemon.home, "backup", str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith(f"backed up {daemon.paths.db} to {target}:"), forced.stdout
    assert "quick_check ok" in forced.stdout
    itself = cli(daemon.home, "backup", str(daemon.paths.db), "--force")  # never over the live one
    assert itself.returncode == 1 and "live database" in one_clear_line(itself.stderr)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can reach (tmp_path's parents are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="agentd-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(path)


@pytest.mark.parametrize("copy", ["backup", "plain-copy"])
def test_read_commands_work_on_a_read_only_copy(
    daemon: Daemon, shared_dir: Path, copy: str
) -> None:
    daemon.write([FINISH])
    assert cli(daemon.home, "init").returncode == 0
    assert cli(daemon.home, "goal", "add", "keep it", "--why", "tests").returncode == 0
    ro_home = shared_dir / "restored"
    ro_home.mkdir()
    if copy == "backup":
        done = cli(daemon.home, "backup", str(ro_home / "agentd.db"))
        assert done.returncode == 0, done.stderr
    else:  # a stopped home copied as it is: the file is still marked WAL
        shutil.copy(daemon.paths.db, ro_home / "agentd.db")
    shutil.copy(daemon.paths.config, ro_home / "config.toml")
    for p in ro_home.iterdir():
        p.chmod(0o444)
    ro_home.chmod(0o555)

    listed = cli(ro_home, "goal", "list", "--json", user=True)
    assert listed.returncode == 0, listed.stderr
    assert [g["title"] for g in json.loads(listed.stdout)] == ["keep it"]
    shown = cli(ro_home, "goal", "show", "1", user=True)
    assert shown.returncode == 0, shown.stderr

    refused = cli(ro_home, "goal", "add", "another", "--why", "tests", user=True)
    assert refused.returncode == 1
    assert "read-only" in one_clear_line(refused.stderr)
    assert sorted(p.name for p in ro_home.iterdir()) == ["agentd.db", "config.toml"]
