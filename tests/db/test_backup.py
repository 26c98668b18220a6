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
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import queries as q
from agentd.db.sqlite import schema
from agentd.db.store import SyncStore
from tests.daemon.test_daemon import FINISH, Daemon, one_clear_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

AGENTD = [sys.executable, "-m", "agentd"]


def cli(home: Path, *args: str, read_only: bool = False) -> subprocess.CompletedProcess[str]:
    """`agentd --home HOME …`; with `read_only`, bound by file modes even when we are root."""
    return subprocess.run(
        [*(bound_by_file_modes() if read_only else []), *AGENTD, "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


def bound_by_file_modes() -> list[str]:
    """A command prefix under which a 0444 file in a 0555 folder cannot be written. Root writes
    through file modes only by its capabilities (CAP_DAC_OVERRIDE and kin), so as root the
    command keeps uid 0 and drops every capability. Another uid (nobody) would not do: it
    cannot read a checkout and venv that sit in a private folder (/root, any 0700 one), and
    fails with "No module named agentd"; uid 0 still owns them and reads them by their modes."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop the capabilities")
    prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-all"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:  # e.g. a container whose root lacks CAP_SETPCAP
        pytest.skip(f"running as root and cannot drop capabilities: {probe.stderr.strip()}")
    return prefix


def invoke(home: Path, *args: str) -> str:
    """`agentd --home HOME …` in-process, for what arranges a home (a CLI process costs ~2 s
    of CPU for its imports); its output."""
    result = CliRunner().invoke(app, ["--home", str(home), *args])
    assert result.exit_code == 0, (args, result.output)
    return result.output


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
    invoke(daemon.home, "init")
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
def ro_home(tmp_path: Path) -> Iterator[Path]:
    """Where a read-only copy of a home goes; made writable again for tmp_path's cleanup."""
    path = tmp_path / "restored"
    path.mkdir()
    try:
        yield path
    finally:
        for p in [path, *path.iterdir()]:
            p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize("copy", ["backup", "plain-copy"])
def test_read_commands_work_on_a_read_only_copy(daemon: Daemon, ro_home: Path, copy: str) -> None:
    daemon.write([FINISH])
    invoke(daemon.home, "init")
    invoke(daemon.home, "goal", "add", "keep it", "--why", "tests")
    if copy == "backup":
        invoke(daemon.home, "backup", str(ro_home / "agentd.db"))
    else:  # a stopped home copied as it is: the file is still marked WAL
        shutil.copy(daemon.paths.db, ro_home / "agentd.db")
    shutil.copy(daemon.paths.config, ro_home / "config.toml")
    for p in ro_home.iterdir():
        p.chmod(0o444)
    ro_home.chmod(0o555)
    write = "import sys; open(sys.argv[1], 'ab')"  # the place is read-only to the commands below
    for path in (ro_home / "agentd.db", ro_home / "agentd.db-wal"):
        probe = [*bound_by_file_modes(), sys.executable, "-c", write, str(path)]
        tried = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        assert "PermissionError" in tried.stderr, (path, tried)

    # All three at once: each spends seconds of CPU importing agentd, and a loaded machine gives
    # three processes more of its time than one after another.
    commands = [
        ["goal", "list", "--json"],
        ["goal", "show", "1"],
        ["goal", "add", "x", "--why", "y"],
    ]
    with ThreadPoolExecutor(len(commands)) as pool:
        done = list(pool.map(lambda args: cli(ro_home, *args, read_only=True), commands))
    listed, shown, refused = done
    assert listed.returncode == 0, listed.stderr
    assert [g["title"] for g in json.loads(listed.stdout)] == ["keep it"]
    assert shown.returncode == 0, shown.stderr
    assert refused.returncode == 1, refused.stdout
    assert "read-only" in one_clear_line(refused.stderr)
    assert sorted(p.name for p in ro_home.iterdir()) == ["agentd.db", "config.toml"]
