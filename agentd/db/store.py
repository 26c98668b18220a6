"""The two stores over the database: SyncStore, the CLI's short transactions on one connection, and
Store, the daemon's, which writes through one Writer (group-committed on its own thread) and reads
on another connection. Both hand their work functions a `Conn`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agentd.db import faults, safety
from agentd.db.conn import Work
from agentd.db.meta import get_meta
from agentd.db.sqlite.connection import (
    begin_write,
    connect,
    data_version,
    is_empty,
    open_migrated,
    translate,
    use_wal,
)
from agentd.db.sqlite.safety import unwell
from agentd.db.sqlite.schema import MIGRATIONS, migrate
from agentd.db.sqlite.schema import version as schema_version
from agentd.errors import StateError

# The daemon's Store alone needs asyncio, a thread pool and the writer thread (which logs, so
# structlog and rich): imported where it is built, so a CLI command pays none of it.
if TYPE_CHECKING:
    import asyncio

    from agentd.db.writer import Insert, Writer

T = TypeVar("T")


class SyncStore:
    """The CLI's store: short `BEGIN IMMEDIATE` transactions on one connection.

    A new file is created and migrated at once (init, tests). An existing database is migrated
    only by the first write: a command that only reads never migrates or fills a database, and
    reads a read-only copy (a backup on a read-only mount) through a read-only connection.
    """

    def __init__(self, path: Path, *, migrate_schema: bool = True, poke: bool = True) -> None:
        self.path = path
        self.poke = poke  # False inside the daemon, for a writer that tells it directly
        safety.check_not_lost(path)
        self.read_only = faults.read_only_reason(path) if path.exists() else None
        if not path.exists() and migrate_schema:
            self.conn = open_migrated(path)
            self._pending = self._first_write = False
            return
        self.conn = connect(path, readonly=self.read_only is not None, wal=False)
        self._pending = migrate_schema  # migrated by the first write
        self._first_write = True

    def close(self) -> None:
        self.conn.close()

    def _writable(self) -> None:
        if self.read_only is not None:
            raise StateError(
                f"{self.path}: read-only: {self.read_only}; this command changes the database, "
                "so run it on a writable home (read commands work here)"
            )
        try:
            if self._first_write:
                use_wal(self.conn)
                self._first_write = False
            if self._pending:
                safety.check_not_lost(self.path)
                migrate(self.conn)
                safety.mark(self.path, get_meta(self.conn, "db_id", "not yet assigned"))
                self._pending = False
        except sqlite3.Error as e:
            raise translate(e, self.path) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self._writable()
        try:
            begin_write(self.conn)
        except sqlite3.Error as e:
            raise translate(e, self.path) from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise translate(e, self.path) from None
        except BaseException:
            self._rollback()
            raise
        if self.poke:
            from agentd.db import poke  # http.client: only a command that wrote pays it

            poke.poke(
                self.path.parent / poke.API_SOCK_NAME
            )  # the daemon acts on it now (best-effort)

    def _rollback(self) -> None:
        # A full disk or an I/O error may have rolled the transaction back already: a bare
        # ROLLBACK would then raise "no transaction is active" over the error that matters.
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def write(self, work: Work[T]) -> T:
        with self.transaction() as conn:
            return work(conn)

    def read(self, work: Work[T]) -> T:
        try:
            if self._pending:
                self._readable()
            return work(self.conn)
        except sqlite3.Error as e:
            err = translate(e, self.path)
            have = schema_version(self.conn) if self._pending else len(MIGRATIONS)
            if have < len(MIGRATIONS):  # read as it is, never upgraded here: say what upgrades it
                raise StateError(
                    f"{err}; the database is at schema version {have} of {len(MIGRATIONS)}: "
                    "a command that writes, or `agentd serve`, upgrades it"
                ) from None
            raise err from None

    def data_version(self) -> int:
        """Changes whenever another connection commits: cheap to poll."""
        return self.read(data_version)

    def _readable(self) -> None:
        """An unmigrated database is read as it is, never upgraded; an empty one is refused."""
        have = schema_version(self.conn)
        if have == 0 and is_empty(self.conn):
            raise StateError(
                f"{self.path}: the database is empty (no agentd schema in it); a command that "
                f"only reads never creates one: run `agentd --home {self.path.parent} init` for "
                f"a new home, or {safety.RESTORE_HINT}"
            )
        if have > len(MIGRATIONS):
            migrate(self.conn)  # raises the "newer than this agentd" error, changing nothing


class Store:
    """The daemon's store: group-committed writes on one thread, reads on another connection.

    `check` runs `PRAGMA quick_check` before migrating (the daemon at start); `errors` counts
    the database errors callers saw, which the daemon's watchdog reads.
    """

    def __init__(self, path: Path, *, check: bool = False) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from agentd.db.sqlite.writer import SQLiteWriter

        self.path = path
        self.check = check
        self.errors = safety.ErrorRate(path, unwell)
        self._writer: Writer = SQLiteWriter(path, check=check, errors=self.errors)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="agentd-reader")
        self._rconn: sqlite3.Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False

    @property
    def batches(self) -> int:
        """Commits made; with `writes`, shows how well group commit batches."""
        return self._writer.batches

    @property
    def writes(self) -> int:
        return self._writer.writes

    async def open(self) -> None:
        """Open the writer (migrating first) on its own thread, then the reader."""
        import asyncio

        self._loop = asyncio.get_running_loop()
        await self._writer.open()
        self._rconn = await self._loop.run_in_executor(self._reader, connect, self.path)

    async def close(self) -> None:
        """Commit what is queued (callers were promised durability), then close."""
        import asyncio

        self._closing = True
        await self._writer.close()
        if self._rconn is not None:
            await asyncio.get_running_loop().run_in_executor(self._reader, self._rconn.close)
        self._reader.shutdown(wait=True)

    async def write(self, work: Work[T]) -> T:
        """Run `work` inside a write transaction; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.path}: the store is closed; not writing")
        fut: asyncio.Future[T] = self._loop.create_future()
        self._writer.submit(work, fut)
        return await fut

    async def insert(self, row: Insert) -> None:
        """Insert one fenced row; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.path}: the store is closed; not writing")
        fut: asyncio.Future[None] = self._loop.create_future()
        self._writer.submit(row, fut)
        await fut

    async def read(self, work: Work[T]) -> T:
        import asyncio

        loop = asyncio.get_running_loop()
        assert self._rconn is not None, "Store.open() first"
        conn = self._rconn

        def run() -> T:
            try:
                return work(conn)
            except sqlite3.Error as e:
                self.errors.record(e)
                raise translate(e, self.path) from None

        return await loop.run_in_executor(self._reader, run)

    async def data_version(self) -> int:
        """Changes whenever another connection (the CLI, our writer) commits: cheap to poll."""
        return await self.read(data_version)
