"""The SQLite Backend (db/backend.py): one database file, its connections, migrations and writer,
over db/sqlite/connection.py, schema.py and writer.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.db import faults, safety
from agentd.db.conn import Conn
from agentd.db.dialect import SQLITE
from agentd.db.meta import get_meta
from agentd.db.sqlite import connection, schema
from agentd.db.sqlite.safety import unwell
from agentd.errors import StateError

if TYPE_CHECKING:
    from agentd.db.writer import Writer


def _sqlite(conn: Conn) -> sqlite3.Connection:
    assert isinstance(conn, sqlite3.Connection), "an SQLite backend's connection"
    return conn


class SQLiteBackend:
    """The database file at `path`: the embedded default."""

    dialect = SQLITE
    shared = False  # the home lock admits one daemon
    Error = sqlite3.Error
    latest = len(schema.MIGRATIONS)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        self.home = path.parent

    def exists(self) -> bool:
        # A lost database in a home that had one is refused before anything looks at it.
        safety.check_not_lost(self.path)
        return self.path.exists()

    def read_only_reason(self) -> str | None:
        return faults.read_only_reason(self.path) if self.path.exists() else None

    def connect(self, *, readonly: bool = False, wal: bool = True, bounded: bool = True) -> Conn:
        del bounded  # no statement timeout on SQLite
        return connection.connect(self.path, readonly=readonly, wal=wal)

    def open_migrated(self, *, check: bool = False) -> Conn:
        return connection.open_migrated(self.path, check=check)

    def prepare_writes(self, conn: Conn, *, migrate: bool) -> None:
        connection.use_wal(_sqlite(conn))
        if migrate:
            safety.check_not_lost(self.path)
            schema.migrate(_sqlite(conn))
            safety.mark(self.path, get_meta(conn, "db_id", "not yet assigned"))

    def begin_write(self, conn: Conn) -> None:
        connection.begin_write(_sqlite(conn))

    batch_deadline_s: float | None = None  # a file does not stall like a network peer

    def abort(self, conn: Conn) -> None:
        _sqlite(conn).interrupt()

    def broken(self, conn: Conn) -> bool:
        return False  # a file: an error is the file's, not a lost connection's

    def in_transaction(self, conn: Conn) -> bool:
        return _sqlite(conn).in_transaction

    def schema_version(self, conn: Conn) -> int:
        return schema.version(_sqlite(conn))

    def migrate(self, conn: Conn) -> None:
        schema.migrate(_sqlite(conn))

    def newer_schema(self, conn: Conn) -> list[tuple[int, str, bool]]:
        return []  # one daemon per file, and a newer file is refused when opened

    def is_empty(self, conn: Conn) -> bool:
        return connection.is_empty(conn)

    def data_version(self, conn: Conn) -> int:
        return connection.data_version(conn)

    def translate(self, error: Exception) -> StateError:
        assert isinstance(error, sqlite3.Error)
        return connection.translate(error, self.path)

    def error_rate(self) -> safety.ErrorRate:
        return safety.ErrorRate(self.path, unwell)

    def listener(self, on_wake: Callable[[], None], log: Any, *, url: str | None = None) -> None:
        return None  # one daemon per file: the CLI pokes it over the home's socket

    def writer(self, *, check: bool, errors: safety.ErrorRate) -> Writer:
        from agentd.db.group import GroupWriter  # the daemon's: threads, structlog

        return GroupWriter(self, check=check, errors=errors)
