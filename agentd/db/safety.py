"""What keeps a database from being lost or misused quietly: the "has run" marker, the SQLite
version the schema needs, `PRAGMA quick_check`, and the daemon's error count.

A database that vanishes (or is truncated to 0 bytes) must never be replaced by an empty one
behind the operator's back: the marker beside it, written once a database was made here, turns
that into a refusal that says what to do. The marker lives in the home, not in the database, so
it survives what it reports.
"""

from __future__ import annotations

import collections
import os
import sqlite3
import threading
import time
from pathlib import Path

from agentd.db import faults
from agentd.db.conn import Conn
from agentd.errors import StateError

# STRICT tables need 3.37, the `->>` operator 3.38 (DESIGN: the schema uses both).
MIN_SQLITE = (3, 38, 0)
MARKER_SUFFIX = ".has-run"
RESTORE_HINT = faults.RESTORE_HINT


def check_sqlite_version(found: tuple[int, int, int] | None = None) -> None:
    """Refuse a SQLite library too old for the schema, before it fails on the first query."""
    found = found or sqlite3.sqlite_version_info
    if tuple(found) < MIN_SQLITE:
        have = ".".join(map(str, found))
        need = ".".join(map(str, MIN_SQLITE))
        raise StateError(
            f"SQLite {have} is too old: agentd's schema needs SQLite {need} or newer (STRICT "
            "tables, the ->> operator); use a Python built against a newer SQLite (python.org "
            "and Debian 12+ builds are), or install pysqlite3 with a bundled SQLite"
        )


def marker_of(db: Path) -> Path:
    return db.with_name(db.name + MARKER_SUFFIX)


def check_not_lost(db: Path) -> None:
    """Refuse a missing or empty database in a home where agentd has made one before."""
    marker = marker_of(db)
    if not marker.exists():
        return
    try:
        size = db.stat().st_size
    except FileNotFoundError:
        size = -1
    except OSError:
        return  # not ours to judge (permissions): opening it reports the real reason
    if size > 0:
        return
    what = "is missing" if size < 0 else "is empty (0 bytes)"
    raise StateError(
        f"{db} {what}, but agentd has run in this home before ({marker.name} is there): the "
        f"database was lost, and starting over would hide that. Stop agentd, {RESTORE_HINT}; "
        f"or, to start over with an empty database on purpose, delete {marker}"
    )


def mark(db: Path, db_id: str) -> None:
    """Record that this home has a database (once; a failure to write it is not fatal)."""
    marker = marker_of(db)
    if marker.exists():
        return
    text = (
        f"agentd made {db.name} here (database id {db_id}, "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}).\n"
        f"If {db.name} is ever missing or empty, agentd refuses to start over: {RESTORE_HINT}.\n"
        f"Delete this file only to start over with an empty database on purpose.\n"
    )
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # another process wrote it, or a read-only home: the next writer tries again
    with os.fdopen(fd, "w") as f:
        f.write(text)


def quick_check(conn: Conn, path: Path) -> None:
    """`PRAGMA quick_check`: refuse a corrupt database with the first problems it names."""
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as e:
        if faults.classify(e, path) not in (faults.Fault.CORRUPT, faults.Fault.OTHER):
            raise StateError(faults.sentence(e, path)) from None  # the disk or a lock, not the file
        rows = [str(e)]
    if rows != ["ok"]:
        raise StateError(
            f"{path}: the database is corrupt (quick_check: {'; '.join(rows)}); stop agentd, "
            f"keep the damaged file for inspection, and {RESTORE_HINT}"
        )


class ErrorRate:
    """Errors that say the database at `path` is unwell (corrupt, unreadable, full, gone), counted
    over the last `window_s`; lock waits pass, and a constraint a request broke is that request's
    problem. The daemon's watchdog stops vouching for a process whose database keeps failing;
    `last` says the latest in the operator's words and `note` what to do once it stopped."""

    def __init__(self, path: Path, limit: int = 10, window_s: float = 30.0) -> None:
        self.path = path
        self.limit = limit
        self.window_s = window_s
        self._at: collections.deque[float] = collections.deque(maxlen=limit)
        self._lock = threading.Lock()  # readers and the writer run on their own threads
        self.last = ""
        self.fault = faults.Fault.OTHER

    def record(self, error: BaseException) -> None:
        # Exactly these types: an IntegrityError (a broken constraint) is a request's own problem.
        unwell = (sqlite3.DatabaseError, sqlite3.OperationalError)
        if not isinstance(error, sqlite3.DatabaseError) or type(error) not in unwell:
            return
        fault = faults.classify(error, self.path)
        if fault is faults.Fault.LOCKED:
            return
        with self._lock:
            self._at.append(time.monotonic())
            self.last = faults.sentence(error, self.path)
            self.fault = fault

    @property
    def note(self) -> str:
        """What the operator does about the latest error once the daemon stopped for it."""
        return faults.exit_note(self.fault, self.path)

    def failing(self) -> bool:
        with self._lock:
            full = len(self._at) == self.limit
            return full and time.monotonic() - self._at[0] <= self.window_s


def untranslated(error: BaseException, db: Path | None) -> str | None:
    """A storage failure that reached a surface untranslated, in db/faults.py's words: a file
    error (a full disk writing a file beside the database), or an sqlite3 error on `db` that
    is the storage's (a full disk, a lock); None for anything else, which keeps its traceback."""
    if isinstance(error, OSError):
        return faults.os_sentence(error)
    if not isinstance(error, sqlite3.Error) or db is None:
        return None
    return None if faults.classify(error, db) is faults.Fault.OTHER else faults.sentence(error, db)
