"""The two stores over the database: SyncStore, the CLI's short transactions on one connection, and
Store, the daemon's, which writes through one Writer (group-committed on its own thread) and reads
on another connection. Both hand their work functions a `Conn`, and reach the engine only through
a Backend (db/backend.py): the database file at `path` unless one is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agentd.db import safety, wake
from agentd.db.backend import Backend, open_backend
from agentd.db.conn import Conn, Work
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

    def __init__(
        self,
        path: Path,
        *,
        migrate_schema: bool = True,
        poke: bool = True,
        backend: Backend | None = None,
        bounded: bool = False,
    ) -> None:
        self.path = path
        self.backend = backend or open_backend(path)
        self.poke = poke  # False inside the daemon, for a writer that tells it directly
        exists = self.backend.exists()
        self.created = not exists and migrate_schema  # made and migrated here (`agentd init`)
        self.read_only = self.backend.read_only_reason()
        if not exists and migrate_schema:
            self.conn = self.backend.open_migrated()
            self._pending = self._first_write = False
            return
        # The CLI's: no statement timeout on its reads (a long listing, an export): a read holds
        # no lock a daemon waits on; its writes keep the lease's (docs/scale-out.md). `bounded`
        # (one inside the daemon: the web inbox's, the API's): its reads keep it too, or a slow
        # read would hold a request's thread for ever.
        self.conn = self.backend.connect(
            readonly=self.read_only is not None, wal=False, bounded=bounded
        )
        self._pending = migrate_schema  # migrated by the first write
        self._first_write = True

    def close(self) -> None:
        self.conn.close()

    def _writable(self) -> None:
        if self.read_only is not None:
            raise StateError(
                f"{self.backend.label}: read-only: {self.read_only}; this command changes the "
                "database, so run it on a writable home (read commands work here)"
            )
        if not (self._first_write or self._pending):
            return
        try:
            self.backend.prepare_writes(self.conn, migrate=self._pending)
            self._first_write = self._pending = False
        except self.backend.Error as e:
            raise self.backend.translate(e) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Conn]:
        self._writable()
        try:
            self.backend.begin_write(self.conn)
        except self.backend.Error as e:
            raise self.backend.translate(e) from None
        try:
            yield self.conn
            if self.poke:  # the daemons sharing a PostgreSQL database hear of it (db/wake.py)
                wake.notify_peers(self.conn)
            self.conn.execute("COMMIT")
        except self.backend.Error as e:
            self._rollback()
            raise self.backend.translate(e) from None
        except BaseException:
            self._rollback()
            raise
        if self.poke:
            from agentd.db import poke  # http.client: only a command that wrote pays it

            # the daemon acts on it now (best-effort)
            poke.poke(self.backend.home / poke.API_SOCK_NAME)

    def _rollback(self) -> None:
        # A full disk or an I/O error may have rolled the transaction back already: a bare
        # ROLLBACK would then raise "no transaction is active" over the error that matters.
        if self.backend.in_transaction(self.conn):
            self.conn.execute("ROLLBACK")

    def write(self, work: Work[T]) -> T:
        with self.transaction() as conn:
            return work(conn)

    def read(self, work: Work[T]) -> T:
        try:
            if self._pending:
                self._readable()
            return work(self.conn)
        except self.backend.Error as e:
            err = self.backend.translate(e)
            latest = self.backend.latest
            have = self.backend.schema_version(self.conn) if self._pending else latest
            if have < latest:  # read as it is, never upgraded here: say what upgrades it
                raise StateError(
                    f"{err}; the database is at schema version {have} of {latest}: "
                    "a command that writes, or `agentd serve`, upgrades it"
                ) from None
            raise err from None

    def data_version(self) -> int:
        """Changes whenever another connection commits: cheap to poll."""
        return self.read(self.backend.data_version)

    def _readable(self) -> None:
        """An unmigrated database is read as it is, never upgraded; an empty one is refused."""
        have = self.backend.schema_version(self.conn)
        if have == 0 and self.backend.is_empty(self.conn):
            raise StateError(
                f"{self.backend.label}: the database is empty (no agentd schema in it); a command "
                f"that only reads never creates one: run `agentd --home {self.backend.home} init` "
                f"for a new home, or {safety.RESTORE_HINT}"
            )
        if have > self.backend.latest:
            self.backend.migrate(self.conn)  # raises "newer than this agentd", changing nothing


class Store:
    """The daemon's store: group-committed writes on one thread, reads on another connection.

    `check` runs `PRAGMA quick_check` before migrating (the daemon at start); `errors` counts
    the database errors callers saw, which the daemon's watchdog reads.
    """

    def __init__(self, path: Path, *, check: bool = False, backend: Backend | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.path = path
        self.backend = backend or open_backend(path)
        self.check = check
        self.errors = self.backend.error_rate()
        self._writer: Writer = self.backend.writer(check=check, errors=self.errors)
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="agentd-reader")
        self._rconn: Conn | None = None
        # `write_apart`'s thread and connection (a shared database only), opened at first use.
        self._apart_thread = ThreadPoolExecutor(1, thread_name_prefix="agentd-apart")
        self._aconn: Conn | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        from agentd.db.outage import Deadline

        # A read, or a write apart, waits no longer than a batch.
        limit = self.backend.batch_deadline_s
        self._deadline = None if limit is None else Deadline(limit, self.backend.abort, "read")
        cut = self.backend.abort
        self._apart_deadline = None if limit is None else Deadline(limit, cut, "write apart")

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
        self._rconn = await self._loop.run_in_executor(self._reader, self.backend.connect)

    async def close(self, timeout_s: float | None = None) -> bool:
        """Commit what is queued (callers were promised durability), then close. False when that
        did not finish within `timeout_s` (a database that stopped answering): the caller exits
        without the last writes rather than hang (its runs resume from their journals)."""
        import asyncio

        self._closing = True
        done = await self._writer.close(timeout_s)
        if not done:
            return False
        if self._rconn is not None:
            closing = asyncio.get_running_loop().run_in_executor(self._reader, self._rconn.close)
            try:
                await asyncio.wait_for(closing, timeout_s)
            except TimeoutError:
                return False
        self._reader.shutdown(wait=False)
        if self._aconn is not None:
            closing = asyncio.get_running_loop().run_in_executor(
                self._apart_thread, self._aconn.close
            )
            try:
                await asyncio.wait_for(closing, timeout_s)
            except TimeoutError:
                return False
        self._apart_thread.shutdown(wait=False)  # a renewal stuck on a dead peer is not waited
        return True

    @property
    def outage(self) -> str | None:
        """What the daemon says while its shared database is unreachable (db/outage.py)."""
        return self.errors.outage.describe() if self.errors.outage is not None else None

    async def write(self, work: Work[T]) -> T:
        """Run `work` inside a write transaction; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.backend.label}: the store is closed; not writing")
        fut: asyncio.Future[T] = self._loop.create_future()
        self._writer.submit(work, fut)
        return await fut

    async def write_chunks(self, work: Work[int], until: asyncio.Event | None = None) -> int:
        """`work` — one bounded chunk of a long delete, returning the rows it did — committed in
        a transaction of its own, again and again until a chunk does nothing (retention): no
        statement outlasts the statement timeout, and writers queue behind one chunk at most.
        Ends early, between chunks, once `until` is set (the daemon's stop: a large backlog
        never holds a stop up; the rest is pruned next time). Returns the rows done."""
        done = 0
        while not (until is not None and until.is_set()) and (n := await self.write(work)):
            done += n
        return done

    async def write_apart(self, work: Work[T]) -> T:
        """`write`, but on a connection and a thread of its own where several daemons share the
        database: what must never queue behind the writer's batches (a lease renewal — one
        slow write would otherwise fence the daemon). SQLite's one writer does it there."""
        import asyncio

        if not self.backend.shared:
            return await self.write(work)
        if self._closing:
            raise StateError(f"{self.backend.label}: the store is closed; not writing")

        return await asyncio.get_running_loop().run_in_executor(
            self._apart_thread, self._write_apart, work
        )

    def _write_apart(self, work: Work[T]) -> T:
        """On the apart thread, as the writer does a batch (db/group.py): a connection the server
        closed is opened again, during an outage not before its backoff; failing to reach the
        database is the outage's (said once, db/outage.py) and a commit ends it; a statement the
        database does not answer is cut at the batch deadline; every error is a StateError."""
        outage = self.errors.outage
        try:
            conn = self._aconn
            if conn is None or self.backend.broken(conn):
                conn = self._reconnect_apart(conn)
            timed = self._apart_deadline
            with timed.timing(conn) if timed else contextlib.nullcontext():
                self.backend.begin_write(conn)
                try:
                    result = work(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(self.backend.Error):  # gone: its error matters
                        if self.backend.in_transaction(conn):
                            conn.execute("ROLLBACK")
                    raise
        except self.backend.Error as e:
            self.errors.record(e)
            raise self.backend.translate(e) from None
        if outage is not None:
            outage.reached()
        return result

    def _reconnect_apart(self, conn: Conn | None) -> Conn:
        outage = self.errors.outage
        if outage is not None and outage.retry_in() > 0:  # backoff: no connection storm
            raise StateError(outage.describe() or f"{self.backend.label}: unreachable")
        if conn is not None:
            with contextlib.suppress(self.backend.Error):
                conn.close()
        self._aconn = None
        try:
            try:
                self._aconn = self.backend.connect()
            except self.backend.Error as e:  # lost while setting the session up
                raise self.backend.translate(e) from None
        except StateError as e:
            if outage is not None:
                outage.failed(str(e))
            raise
        return self._aconn

    async def insert(self, row: Insert) -> None:
        """Insert one fenced row; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.backend.label}: the store is closed; not writing")
        fut: asyncio.Future[None] = self._loop.create_future()
        self._writer.submit(row, fut)
        await fut

    async def read(self, work: Work[T]) -> T:
        import asyncio

        loop = asyncio.get_running_loop()
        assert self._rconn is not None, "Store.open() first"

        def run() -> T:  # on the reader's one thread: the connection is its alone
            outage = self.errors.outage
            for retry in (True, False):
                conn = self._rconn
                assert conn is not None
                try:
                    if self.backend.broken(conn):  # the server closed it: open another
                        conn = self._reconnect(conn)
                    timed = self._deadline
                    with timed.timing(conn) if timed else contextlib.nullcontext():
                        result = work(conn)
                except self.backend.Error as e:
                    if retry and self.backend.broken(conn):
                        continue  # found closed by this read: a read may simply run again
                    self.errors.record(e)
                    raise self.backend.translate(e) from None
                if outage is not None:
                    outage.reached()
                return result
            raise AssertionError("unreachable")

        return await loop.run_in_executor(self._reader, run)

    async def data_version(self) -> int:
        """Changes whenever another connection (the CLI, our writer) commits: cheap to poll."""
        return await self.read(self.backend.data_version)

    def _reconnect(self, conn: Conn) -> Conn:
        """On the reader's thread: a new connection for one the server closed; during an outage
        not before its backoff, and a failure is the outage's (said once, db/outage.py)."""
        outage = self.errors.outage
        if outage is not None and outage.retry_in() > 0:
            raise StateError(outage.describe() or f"{self.backend.label}: unreachable")
        conn.close()
        try:
            self._rconn = self.backend.connect()
        except StateError as e:
            if outage is not None:
                outage.failed(str(e))
            raise
        return self._rconn
