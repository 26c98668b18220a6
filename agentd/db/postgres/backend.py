"""The PostgreSQL Backend (db/backend.py): one database several daemons share, its connections,
migrations (db/postgres/schema.py) and the daemon's group-committing writer (db/group.py).

The home folder stays where it is (config, the API socket, the home lock: per host); only its
state lives in the database at `url`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from agentd.db import faults, safety
from agentd.db.conn import Conn
from agentd.db.dialect import POSTGRES
from agentd.db.outage import Outage
from agentd.db.postgres import connection, schema
from agentd.db.postgres.connection import PostgresConn
from agentd.errors import StateError

if TYPE_CHECKING:
    from agentd.db.postgres.listener import Listener
    from agentd.db.writer import Writer


def _pg(conn: Conn) -> PostgresConn:
    assert isinstance(conn, PostgresConn), "a PostgreSQL backend's connection"
    return conn


def unwell(error: BaseException, path: Path) -> tuple[faults.Fault, str] | None:
    """A PostgreSQL error that says the database is unwell (unreachable, full, read-only, its
    connection gone), as its fault and sentence; None for a lock wait or a request's own problem
    (a broken constraint, a query's error)."""
    del path
    if not isinstance(error, psycopg.Error):
        return None
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, pg_errors.LockNotAvailable | pg_errors.SerializationFailure):
        return None
    if isinstance(error, pg_errors.DiskFull):
        return faults.Fault.FULL, f"the database server is out of space: {first}"
    if isinstance(error, pg_errors.ReadOnlySqlTransaction):
        return faults.Fault.READ_ONLY, f"the database is read-only (a standby?): {first}"
    if isinstance(error, psycopg.OperationalError | pg_errors.AdminShutdown):
        return faults.Fault.CANNOT_OPEN, f"the database connection failed: {first}"
    return None


class PostgresBackend:
    """The PostgreSQL database at `url`, serving the home at `home`."""

    dialect = POSTGRES
    shared = True
    Error = psycopg.Error
    latest = len(schema.MIGRATIONS)

    def __init__(
        self, url: str, home: Path, *, lease_s: float = connection.DEFAULT_LEASE_S
    ) -> None:
        self.url = url
        self.label = connection.label(url)
        self.home = home
        self.lease_s = lease_s  # the daemons' run lease: sessions idle in a transaction end sooner

    def exists(self) -> bool:
        conn = connection.connect(self.url, lease_s=self.lease_s)
        try:
            return schema.version(conn) > 0 or not self.is_empty(conn)
        finally:
            conn.close()

    def read_only_reason(self) -> str | None:
        return None  # a standby refuses writes itself, and the error says so

    def connect(self, *, readonly: bool = False, wal: bool = True, bounded: bool = True) -> Conn:
        del wal  # SQLite's journal-mode switch: nothing to spare here
        conn = connection.connect(self.url, lease_s=self.lease_s, bounded=bounded)
        if readonly:
            conn.execute("SET default_transaction_read_only = on")
        return conn

    def open_migrated(self, *, check: bool = False) -> Conn:
        del check  # the server checks its own pages; there is no file to look at here
        conn = connection.connect(self.url, lease_s=self.lease_s)
        try:
            with self._unbounded(conn):
                schema.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _unbounded(self, conn: Conn) -> Iterator[None]:
        """A migration may rewrite big tables: no statement timeout while it runs."""
        conn.execute("SET statement_timeout = 0")
        yield
        conn.execute(f"SET statement_timeout = {_pg(conn).session_timeout_ms}")

    def prepare_writes(self, conn: Conn, *, migrate: bool) -> None:
        if migrate:
            with self._unbounded(conn):
                schema.migrate(_pg(conn))

    def begin_write(self, conn: Conn) -> None:
        # A connection without a statement timeout (the CLI's) bounds its writes by the lease:
        # they hold locks the daemons wait on. One round trip either way.
        bound = _pg(conn).write_timeout_ms
        conn.execute("BEGIN" if bound is None else f"BEGIN; SET LOCAL statement_timeout = {bound}")

    def broken(self, conn: Conn) -> bool:
        raw = _pg(conn).raw
        return raw.closed or raw.broken

    def in_transaction(self, conn: Conn) -> bool:
        return _pg(conn).in_transaction

    def schema_version(self, conn: Conn) -> int:
        return schema.version(_pg(conn))

    def migrate(self, conn: Conn) -> None:
        conn.execute("SET statement_timeout = 0")  # and for what follows: `store copy`'s COPY
        schema.migrate(_pg(conn))

    @property
    def batch_deadline_s(self) -> float | None:
        return connection.batch_deadline_s(self.lease_s)

    def abort(self, conn: Conn) -> None:
        _pg(conn).abort()

    def newer_schema(self, conn: Conn) -> list[tuple[int, str, bool]]:
        return schema.newer(_pg(conn), self.latest)

    def is_empty(self, conn: Conn) -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
        ).fetchone()
        return int(row[0]) == 0

    def data_version(self, conn: Conn) -> int:
        # The next transaction id to be assigned: it moves whenever any write transaction of
        # the cluster starts, so a commit of another daemon or of the CLI is never missed
        # (other writers move it too: a needless scan, never a missed one).
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
        return int(row[0])

    def translate(self, error: Exception) -> StateError:
        return connection.translate(error, self.url)

    def error_rate(self) -> safety.ErrorRate:
        return safety.ErrorRate(self.home, unwell, outage=Outage(self.label))

    def listener(
        self, on_wake: Callable[[], None], log: Any, *, url: str | None = None
    ) -> Listener:
        from agentd.db.postgres.listener import Listener

        listener = Listener(url or self.url, on_wake, log)
        listener.start()
        return listener

    def writer(self, *, check: bool, errors: safety.ErrorRate) -> Writer:
        from agentd.db.group import GroupWriter  # the daemon's: threads, structlog

        return GroupWriter(self, check=check, errors=errors)
