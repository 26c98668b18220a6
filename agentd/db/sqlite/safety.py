"""What keeps an SQLite database from being misused quietly: the SQLite version the schema needs,
`PRAGMA quick_check`, and which of SQLite's errors say the database is unwell.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentd.db import faults
from agentd.db.conn import Conn
from agentd.db.sqlite import faults as sqlite_faults
from agentd.errors import StateError

RESTORE_HINT = faults.RESTORE_HINT
# STRICT tables need 3.37, the `->>` operator 3.38 (DESIGN: the schema uses both).
MIN_SQLITE = (3, 38, 0)


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


def quick_check(conn: Conn | sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check`: refuse a corrupt database with the first problems it names."""
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as e:
        if sqlite_faults.classify(e, path) not in (faults.Fault.CORRUPT, faults.Fault.OTHER):
            raise StateError(
                sqlite_faults.sentence(e, path)
            ) from None  # the disk or a lock, not the file
        rows = [str(e)]
    if rows != ["ok"]:
        raise StateError(
            f"{path}: the database is corrupt (quick_check: {'; '.join(rows)}); stop agentd, "
            f"keep the damaged file for inspection, and {RESTORE_HINT}"
        )


def unwell(error: BaseException, path: Path) -> tuple[faults.Fault, str] | None:
    """An error that says the database at `path` is unwell (corrupt, unreadable, full, gone), as
    its fault and sentence (db/safety.ErrorRate counts it); None for a lock wait, or for a broken
    constraint, a request's own problem."""
    # Exactly these types: an IntegrityError (a broken constraint) is a request's own problem.
    unwell = (sqlite3.DatabaseError, sqlite3.OperationalError)
    if not isinstance(error, sqlite3.DatabaseError) or type(error) not in unwell:
        return None
    fault = sqlite_faults.classify(error, path)
    if fault is faults.Fault.LOCKED:
        return None
    return fault, sqlite_faults.sentence(error, path)


def untranslated(error: BaseException, db: Path | None) -> str | None:
    """A storage failure that reached a surface untranslated, in db/faults.py's words: a file
    error (a full disk writing a file beside the database), or an sqlite3 error on `db` that
    is the storage's (a full disk, a lock); None for anything else, which keeps its traceback."""
    if isinstance(error, OSError):
        return faults.os_sentence(error)
    if not isinstance(error, sqlite3.Error) or db is None:
        return None
    return (
        None
        if sqlite_faults.classify(error, db) is faults.Fault.OTHER
        else sqlite_faults.sentence(error, db)
    )
