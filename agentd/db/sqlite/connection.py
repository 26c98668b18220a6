"""SQLite connections: the URI, the PRAGMAs every connection gets (WAL, synchronous=FULL, foreign
keys, busy timeout), the statements only SQLite has (`BEGIN IMMEDIATE`, `PRAGMA data_version`), and
SQLite's errors translated into messages that say what to do (db/sqlite/faults.py).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import urllib.parse
from pathlib import Path

from agentd.db import safety
from agentd.db.conn import Conn
from agentd.db.dialect import SQLITE, Dialect
from agentd.db.meta import get_meta
from agentd.db.sqlite import faults
from agentd.db.sqlite import safety as sqlite_safety
from agentd.db.sqlite.schema import migrate
from agentd.errors import StateError

BUSY_TIMEOUT_MS = 5000


class SQLiteConnection(sqlite3.Connection):
    """sqlite3's connection with the dialect the queries read (`c.dialect`): a class attribute,
    so the hot path calls sqlite3 itself, with no wrapper in between."""

    dialect: Dialect = SQLITE


def uri(path: Path, *, readonly: bool = False, immutable: bool = False) -> str:
    """The SQLite URI of `path`, percent-encoded: `#`, `?` or `%` in a folder name stays a name."""
    text = str(path)
    # `file://` + an absolute path has an empty authority, so a path starting `//` stays a path.
    root = "//" if text.startswith("/") else ""
    flags = "&immutable=1" if immutable else ""
    return f"file:{root}{urllib.parse.quote(text)}?mode={'ro' if readonly else 'rwc'}{flags}"


def _create_private(path: Path) -> None:
    """Create a missing database file as 0600 before SQLite opens it: SQLite gives the -wal and
    -shm files the database's mode, and the database holds observations, answers and replies."""
    # It may exist (another process may have just made it); any other failure SQLite reports.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def connect(path: Path, *, readonly: bool = False, wal: bool = True) -> SQLiteConnection:
    """Open `path` with agentd's pragmas: WAL, synchronous=FULL, foreign keys, busy timeout.
    `wal=False` leaves the journal mode as it is (switching writes the file: a reader must not)."""
    sqlite_safety.check_sqlite_version()
    if not readonly and not path.parent.exists():
        raise StateError(f"{path.parent}: state directory does not exist; run `agentd init`")
    if not readonly:
        _create_private(path)
    # A WAL database in a folder nobody may write (a backup on a read-only mount) cannot get
    # its -shm file: with no -wal beside it, nothing can change it, so it opens as immutable.
    immutable = readonly and _frozen(path)
    try:
        conn = sqlite3.connect(
            uri(path, readonly=readonly, immutable=immutable),
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            factory=SQLiteConnection,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if wal and not readonly:
            use_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as e:
        raise translate(e, path) from None
    return conn


def _frozen(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    no_wal = not wal.exists() or wal.stat().st_size == 0
    return no_wal and not os.access(path.parent, os.W_OK)


def use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL (it persists, so only a fresh database switches). The switch needs a lock that
    SQLite does not wait for, to avoid a deadlock: when two processes open a fresh database at
    once, one gets "database is locked" at once, so it retries here for up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def translate(e: sqlite3.Error, path: Path) -> StateError:
    """An SQLite error as a message that says what went wrong and what to do (db/faults.py)."""
    return StateError(faults.sentence(e, path))


def open_migrated(path: Path, *, check: bool = False) -> SQLiteConnection:
    """Open for writing and bring the schema up to date. `check` runs `PRAGMA quick_check` first
    (the daemon, at start). Refuses a lost database in a home that had one (safety.check_not_lost)
    and, once the schema is in place, leaves the marker that makes that refusal possible."""
    safety.check_not_lost(path)
    conn = connect(path)
    try:
        if check:
            sqlite_safety.quick_check(conn, path)
        migrate(conn)
        safety.mark(path, get_meta(conn, "db_id", "not yet assigned"))
    except sqlite3.Error as e:
        conn.close()
        raise translate(e, path) from None
    except BaseException:
        conn.close()
        raise
    return conn


def begin_write(conn: sqlite3.Connection) -> None:
    """Begin a write transaction that takes the write lock at once (waiting up to the busy
    timeout), so it never fails halfway through on a read lock it cannot upgrade."""
    conn.execute("BEGIN IMMEDIATE")


def data_version(conn: Conn) -> int:
    """Changes whenever another connection (the CLI, our writer) commits: cheap to poll."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def is_empty(conn: Conn) -> bool:
    """Whether the database holds no schema at all (no table, index or trigger)."""
    return int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) == 0


def probe(conn: Conn) -> None:
    """A read that touches the database's pages (`SELECT 1` would not even open the file): the
    daemon's watchdog proves the database alive with it, on either engine (PostgreSQL has no
    sqlite_master: the read of runs is the probe there)."""
    if conn.dialect.sqlite:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    conn.execute("SELECT max(run_id) FROM runs").fetchone()
