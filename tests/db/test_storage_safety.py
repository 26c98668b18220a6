"""Storage that never hides a loss (issue 10, items 4-6 and 8), through the real CLI and daemon.

`init` keeps a hand-written config (and `--force` keeps a .bak); a lost or emptied database in a
home that has run is refused, never replaced; a command that only reads never creates or migrates
a database; a corrupt database is refused at start, and one that turns corrupt under a running
daemon stops the systemd watchdog and ends the process with a non-zero status.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.db.sqlite import safety, schema
from agentd.db.store import SyncStore
from tests.daemon.test_daemon import FINISH, Daemon, one_clear_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

AGENTD = [sys.executable, "-m", "agentd"]
HAND_WRITTEN = """\
# my own config, written by hand
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env},
    )


def user_version(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def ran_once(daemon: Daemon) -> None:
    """A home that has run: a database made by `agentd init`, then left as a stopped daemon would.
    `init` runs in-process: it only arranges the home, and a CLI process costs seconds of CPU."""
    daemon.write([FINISH])
    done = CliRunner().invoke(app, ["--home", str(daemon.home), "init"])
    assert done.exit_code == 0, done.output
    for suffix in ("-wal", "-shm"):
        daemon.paths.db.with_name(daemon.paths.db.name + suffix).unlink(missing_ok=True)


# ── 4. init keeps what the operator wrote ────────────────────────────────────────────────────
def test_init_keeps_a_hand_written_config_and_creates_the_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(HAND_WRITTEN)
    done = cli(home, "init")
    assert done.returncode == 0, done.stderr
    assert (home / "config.toml").read_text() == HAND_WRITTEN
    assert f"kept {home / 'config.toml'}" in done.stdout
    assert f"created {home / 'agentd.db'}" in done.stdout
    assert user_version(home / "agentd.db") == len(schema.MIGRATIONS)
    assert (home / "replies.json").is_file()  # what the kept config names, as a placeholder


def test_init_force_keeps_a_bak_of_the_config_it_replaces(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(HAND_WRITTEN)
    done = cli(home, "init", "--force")
    assert done.returncode == 0, done.stderr
    assert (home / "config.toml.bak").read_text() == HAND_WRITTEN
    assert (home / "config.toml").read_text() != HAND_WRITTEN
    assert (home / "config.toml.bak").stat().st_mode & 0o077 == 0
    again = CliRunner().invoke(app, ["--home", str(home), "init", "--force"])  # in-process
    assert again.exit_code == 0, again.output  # a second .bak never overwrites the first
    assert (home / "config.toml.bak").read_text() == HAND_WRITTEN
    assert (home / "config.toml.bak.1").is_file()


# ── 5. a lost database is refused, never replaced ────────────────────────────────────────────
@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_serve_refuses_a_lost_database_in_a_home_that_has_run(daemon: Daemon, how: str) -> None:
    ran_once(daemon)
    if how == "emptied":
        daemon.paths.db.write_bytes(b"")
    else:
        daemon.paths.db.unlink()
    proc = daemon.start()
    try:
        code = proc.wait(timeout=60)  # a Python start takes seconds on a loaded machine
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve started over on a {how} database:\n{daemon.logs()[-2000:]}")
    assert code == 1
    message = one_clear_line(daemon.logs())
    assert str(daemon.paths.db) in message and "backup" in message, message
    assert "agentd.db.has-run" in message  # how to start over on purpose
    if how == "emptied":
        assert daemon.paths.db.stat().st_size == 0
    else:
        assert not daemon.paths.db.exists()


# Every command that opens the home's database to read it. Each runs in-process (a CLI process
# costs ~2 s of CPU for its imports, far more on a loaded machine); one runs as a real process.
READ_COMMANDS = [
    ["goal", "list"],
    ["goal", "show", "1"],
    ["runs", "list"],
    ["runs", "show", "1"],
    ["inbox", "list"],
    ["inbox", "show", "1"],
    ["event", "list"],
    ["artifact", "list"],
    ["checkins"],
    ["status"],
    ["usage"],
]


def test_read_commands_refuse_an_emptied_database_in_a_home_that_has_run(daemon: Daemon) -> None:
    ran_once(daemon)
    daemon.paths.db.write_bytes(b"")
    before = sorted(p.name for p in daemon.home.iterdir())
    # "empty" alone would also match the refusal of a never-run home; the marker says "has run".
    done = cli(daemon.home, "goal", "list")  # the real process: its exit code and one line
    assert done.returncode == 1, done.stdout
    message = one_clear_line(done.stderr)
    assert "empty" in message and "agentd.db.has-run" in message, message
    for args in READ_COMMANDS:
        result = CliRunner().invoke(app, ["--home", str(daemon.home), *args])
        assert result.exit_code == 1, (args, result.output)
        message = one_clear_line(result.stderr)
        assert "empty" in message and "agentd.db.has-run" in message, (args, message)
        assert daemon.paths.db.stat().st_size == 0, args
    assert sorted(p.name for p in daemon.home.iterdir()) == before  # no -wal, no new database


def test_a_read_command_never_fills_an_empty_database_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(HAND_WRITTEN)
    (home / "agentd.db").write_bytes(b"")  # e.g. a crash before the first migration finished
    done = cli(home, "goal", "list")
    assert done.returncode == 1, done.stdout
    message = one_clear_line(done.stderr)
    assert "empty" in message and "init" in message, message
    assert (home / "agentd.db").stat().st_size == 0
    assert sorted(p.name for p in home.iterdir()) == ["agentd.db", "config.toml"]


def test_a_read_command_never_migrates_an_older_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(HAND_WRITTEN)
    conn = sqlite3.connect(home / "agentd.db", isolation_level=None)
    schema.migrate(conn, schema.MIGRATIONS[:1])
    conn.close()
    done = cli(home, "goal", "list", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert user_version(home / "agentd.db") == 1
    written = CliRunner().invoke(app, ["--home", str(home), "goal", "add", "a", "--why", "t"])
    assert written.exit_code == 0, written.output  # a write migrates (in-process: ~2 s less CPU)
    assert user_version(home / "agentd.db") == len(schema.MIGRATIONS)


# ── 6. corruption: refused at start, and noticed while serving ───────────────────────────────
def test_serve_refuses_a_database_that_fails_quick_check(daemon: Daemon) -> None:
    ran_once(daemon)
    store = SyncStore(daemon.paths.db)
    store.write(  # enough rows for a few b-tree pages beyond the schema's
        lambda c: [qi.add_event(c, "e", {"n": i}, f"k{i}", source="cli") for i in range(200)]
    )
    store.close()
    db = daemon.paths.db
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with db.open("r+b") as f:  # the events table's root page: its header no longer parses
        f.seek((root - 1) * page)
        f.write(b"\xff" * 64)
    proc = daemon.start()
    try:
        code = proc.wait(timeout=60)  # a Python start takes seconds on a loaded machine
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve started on a corrupt database:\n{daemon.logs()[-2000:]}")
    assert code == 1
    message = one_clear_line(daemon.logs())
    assert "corrupt" in message and "quick_check" in message and "backup" in message, message


class NotifySocket:
    """A stand-in for systemd's notification socket: every datagram, with when it came."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                self.messages.append((time.monotonic(), self.sock.recv(4096).decode()))
            except TimeoutError:
                continue
            except OSError:
                return

    def count(self, text: str, since: float = 0.0) -> int:
        return sum(text in m for at, m in list(self.messages) if at >= since)

    def close(self) -> None:
        self.sock.close()
        self._thread.join(2)


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    s = NotifySocket(tmp_path / "notify.sock")
    yield s
    s.close()


def test_a_database_corrupted_under_the_daemon_stops_the_watchdog_and_exits_non_zero(
    daemon: Daemon, notify: NotifySocket, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon.write([FINISH])
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify.path))
    monkeypatch.setenv("WATCHDOG_USEC", "400000")  # WATCHDOG=1 every 0.2 s
    proc = daemon.serve()
    daemon.until("the watchdog to be petted", lambda: notify.count("WATCHDOG=1") >= 3)
    corrupted = time.monotonic()
    for suffix in ("", "-wal", "-shm"):  # the disk returns garbage from here on
        path = daemon.paths.db.with_name(daemon.paths.db.name + suffix)
        with path.open("r+b") as f:
            f.write(os.urandom(path.stat().st_size))
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the daemon kept serving a corrupt database:\n{daemon.logs()[-2000:]}")
    assert code != 0
    # At most one petting already on its way when the garbage landed; none after the failure.
    assert notify.count("WATCHDOG=1", since=corrupted + 0.3) == 0, notify.messages
    logs = daemon.logs()
    assert '"daemon.database_failing"' in logs
    # Identical error lines are held back, not written ten times a second.
    assert logs.count('"scheduler.tick_failed"') <= 2, logs[-3000:]


def test_a_database_deleted_under_the_daemon_stops_it_before_writes_are_lost(
    daemon: Daemon, notify: NotifySocket, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon.write([FINISH])
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify.path))
    monkeypatch.setenv("WATCHDOG_USEC", "400000")
    proc = daemon.serve()
    daemon.until("the watchdog to be petted", lambda: notify.count("WATCHDOG=1") >= 2)
    removed = time.monotonic()
    for suffix in ("", "-wal", "-shm"):  # `rm agentd.db*` while it runs: it writes to nothing
        daemon.paths.db.with_name(daemon.paths.db.name + suffix).unlink(missing_ok=True)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the daemon kept writing to a deleted database:\n{daemon.logs()[-2000:]}")
    assert code != 0
    assert notify.count("WATCHDOG=1", since=removed + 0.3) == 0, notify.messages
    assert '"daemon.database_gone"' in daemon.logs()


# ── 8. the SQLite library is new enough ──────────────────────────────────────────────────────
def test_an_sqlite_older_than_the_schema_needs_is_refused_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    assert CliRunner().invoke(app, ["--home", str(home), "init"]).exit_code == 0
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 37, 2))
    result = CliRunner().invoke(app, ["--home", str(home), "goal", "list"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "SQLite 3.37.2 is too old" in result.stderr and "3.38" in result.stderr, result.stderr


def test_the_sqlite_version_check_accepts_this_build() -> None:
    safety.check_sqlite_version()  # the library these tests run on (3.40 here)
    assert sqlite3.sqlite_version_info >= safety.MIN_SQLITE
