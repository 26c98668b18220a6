"""SQLite connections: pragmas, error translation, a sync store for the CLI, a group-committing async one.

The daemon has one writer connection on one thread. Writes queue up while the previous batch commits;
the next batch runs as ONE `BEGIN IMMEDIATE … COMMIT` (one fsync); if one request fails, the batch is
rolled back and redone one request per transaction, so a failure never sinks its neighbours. No
caller resumes before its batch is durable.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

from agentd.db import safety
from agentd.db.conn import Conn, Work
from agentd.db.meta import get_meta
from agentd.db.poke import API_SOCK_NAME, poke
from agentd.db.sqlite.schema import MIGRATIONS, migrate
from agentd.db.sqlite.schema import version as schema_version
from agentd.errors import AgentdError, StateError

T = TypeVar("T")
log = structlog.get_logger("agentd.db")

BUSY_TIMEOUT_MS = 5000


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


def connect(path: Path, *, readonly: bool = False, wal: bool = True) -> sqlite3.Connection:
    """Open `path` with agentd's pragmas: WAL, synchronous=FULL, foreign keys, busy timeout.
    `wal=False` leaves the journal mode as it is (switching writes the file: a reader must not)."""
    safety.check_sqlite_version()
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
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if wal and not readonly:
            _use_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as e:
        raise translate(e, path) from None
    return conn


def _frozen(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    no_wal = not wal.exists() or wal.stat().st_size == 0
    return no_wal and not os.access(path.parent, os.W_OK)


def _use_wal(conn: sqlite3.Connection) -> None:
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
    """An SQLite error as a message that says what to do."""
    text = str(e)
    if "readonly" in text or "read-only" in text:
        return StateError(
            f"{path}: database is read-only ({text}); agentd needs write access to the file "
            "and its folder (for -wal and -shm)"
        )
    if "locked" in text or "busy" in text:
        return StateError(f"{path}: database is locked by another process ({text}); retry shortly")
    if "unable to open" in text:
        if path.exists() and not os.access(path, os.R_OK):
            return StateError(f"{path}: cannot open database: this user may not read it ({text})")
        if reason := safety.read_only_reason(path):
            return StateError(f"{path}: cannot open database: read-only: {reason} ({text})")
        return StateError(f"{path}: cannot open database ({text}); check the path and permissions")
    return StateError(f"{path}: database error: {text}")


def open_migrated(path: Path, *, check: bool = False) -> sqlite3.Connection:
    """Open for writing and bring the schema up to date. `check` runs `PRAGMA quick_check` first
    (the daemon, at start). Refuses a lost database in a home that had one (safety.check_not_lost)
    and, once the schema is in place, leaves the marker that makes that refusal possible."""
    safety.check_not_lost(path)
    conn = connect(path)
    try:
        if check:
            safety.quick_check(conn, path)
        migrate(conn)
        safety.mark(path, get_meta(conn, "db_id", "not yet assigned"))
    except sqlite3.Error as e:
        conn.close()
        raise translate(e, path) from None
    except BaseException:
        conn.close()
        raise
    return conn


@dataclass(frozen=True)
class Insert:
    """One row for a fenced `INSERT … SELECT … WHERE <fence>` that must insert exactly one row.

    Consecutive Inserts with the same SQL in a batch reach SQLite as one `executemany`: the
    journal's hot path costs one statement call per batch instead of one per step. `explain`
    raises the precise reason when the row was not inserted (lease lost, run not running).
    """

    sql: str
    params: tuple[Any, ...]
    explain: Callable[[Conn], None]


Request = tuple["Work[Any] | Insert", "asyncio.Future[Any]"]


def _settle(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """On the loop: resolve one batch's futures (a cancelled caller's write still happened)."""
    for fut, ok, value in outcomes:
        if fut.done():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _run_of_inserts(works: list[Any], start: int) -> int:
    """How many Inserts with the same SQL begin at `start` (0 when it is a work function)."""
    first = works[start]
    if not isinstance(first, Insert):
        return 0
    n = 1
    while start + n < len(works):
        nxt = works[start + n]
        if not isinstance(nxt, Insert) or nxt.sql != first.sql:
            break
        n += 1
    return n


def _insert_rows(conn: Conn, rows: list[Insert]) -> None:
    inserted = conn.executemany(rows[0].sql, [r.params for r in rows]).rowcount
    if inserted != len(rows):
        if len(rows) == 1:
            rows[0].explain(conn)
        raise StateError(f"{len(rows) - inserted} of {len(rows)} fenced rows were not inserted")


class _RequestFailed(Exception):
    """One request in a group commit raised: the batch is rolled back and retried one by one."""


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
        self.read_only = safety.read_only_reason(path) if path.exists() else None
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
                _use_wal(self.conn)
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
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise translate(e, self.path) from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            self.conn.execute("ROLLBACK")
            raise translate(e, self.path) from None
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        if self.poke:
            poke(self.path.parent / API_SOCK_NAME)  # the daemon acts on it now (best-effort)

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

    def _readable(self) -> None:
        """An unmigrated database is read as it is, never upgraded; an empty one is refused."""
        have = schema_version(self.conn)
        if have == 0 and self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
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
        self.path = path
        self.check = check
        self.errors = safety.ErrorRate()
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="agentd-reader")
        self._rconn: sqlite3.Connection | None = None
        self._wconn: sqlite3.Connection | None = None
        self._queue: collections.deque[Request] = collections.deque()
        self._ready = threading.Event()  # set when the queue may hold work (or we are closing)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self.batches = 0  # commits made; with `writes`, shows how well group commit batches
        self.writes = 0

    async def open(self) -> None:
        """Open the writer (migrating first) on its own thread, then the reader."""
        self._loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._writer_main, args=(opened,), name="agentd-writer", daemon=True
        )
        self._thread.start()
        await opened
        self._rconn = await self._loop.run_in_executor(self._reader, connect, self.path)

    async def close(self) -> None:
        """Commit what is queued (callers were promised durability), then close."""
        self._closing = True
        if self._thread is not None:
            self._ready.set()
            await asyncio.to_thread(self._thread.join)
        if self._rconn is not None:
            await asyncio.get_running_loop().run_in_executor(self._reader, self._rconn.close)
        self._reader.shutdown(wait=True)

    async def write(self, work: Work[T]) -> T:
        """Run `work` inside a write transaction; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.path}: the store is closed; not writing")
        fut: asyncio.Future[T] = self._loop.create_future()
        self._queue.append((work, fut))
        self._ready.set()
        return await fut

    async def insert(self, row: Insert) -> None:
        """Insert one fenced row; returns once it is committed (durable)."""
        if self._closing or self._loop is None:
            raise StateError(f"{self.path}: the store is closed; not writing")
        fut: asyncio.Future[None] = self._loop.create_future()
        self._queue.append((row, fut))
        self._ready.set()
        await fut

    async def read(self, work: Work[T]) -> T:
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

    def _writer_main(self, opened: asyncio.Future[None]) -> None:
        """The writer thread: take everything queued, commit it as one batch, hand the outcomes
        back to the loop in one call, repeat. It runs beside the event loop, so while a batch
        commits, the loop already queues the next one: the two overlap instead of taking turns.
        """
        loop = self._loop
        assert loop is not None
        try:
            self._wconn = open_migrated(self.path, check=self.check)
        except BaseException as e:
            loop.call_soon_threadsafe(_settle, [(opened, False, e)])
            return
        loop.call_soon_threadsafe(_settle, [(opened, True, None)])
        while True:
            self._ready.wait()
            # Clear before draining: a write queued after this point sets the event again, so
            # no wake-up is lost; one queued before it is drained now.
            self._ready.clear()
            batch = []
            while self._queue:
                batch.append(self._queue.popleft())
            if batch:
                try:
                    outcomes = self._commit(batch)
                except Exception as e:  # never let the writer die: every caller gets an answer
                    err = translate(e, self.path) if isinstance(e, sqlite3.Error) else e
                    self.errors.record(e)
                    log.error("db.writer_failed", error=str(err), requests=len(batch))
                    outcomes = [(False, err)] * len(batch)
                settled = [
                    (fut, ok, value) for (_, fut), (ok, value) in zip(batch, outcomes, strict=True)
                ]
                loop.call_soon_threadsafe(_settle, settled)
            # Checked after every pass: close() may have set the event before our clear().
            if self._closing and not self._queue:
                break
        self._wconn.close()

    def _commit(self, batch: list[Request]) -> list[tuple[bool, Any]]:
        """Commit a batch as one transaction; if any request fails, redo them one by one.

        The fast path has no per-request savepoints (they would double the statements); work
        functions only touch the database, so re-running them after a rollback is safe.
        """
        try:
            return self._transaction([w for w, _ in batch], isolate=False)
        except _RequestFailed:
            return [self._transaction([w], isolate=True)[0] for w, _ in batch]

    def _transaction(
        self, works: list[Work[Any] | Insert], *, isolate: bool
    ) -> list[tuple[bool, Any]]:
        conn = self._wconn
        assert conn is not None
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            i = 0
            while i < len(works):
                n = _run_of_inserts(works, i)
                try:
                    if n:
                        _insert_rows(conn, works[i : i + n])  # type: ignore[arg-type]
                        outcomes += [(True, None)] * n
                    else:
                        outcomes.append((True, works[i](conn)))  # type: ignore[operator]
                except Exception as e:
                    if not isolate:
                        raise _RequestFailed from e
                    self.errors.record(e)
                    conn.execute("ROLLBACK")
                    failure = translate(e, self.path) if isinstance(e, sqlite3.Error) else e
                    return [(False, failure)]
                i += max(n, 1)
            conn.execute("COMMIT")
        except _RequestFailed:
            if conn.in_transaction:  # an I/O error or a full disk may have rolled back already
                conn.execute("ROLLBACK")
            raise
        except sqlite3.Error as e:
            self.errors.record(e)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            err: AgentdError = translate(e, self.path)
            log.error("db.commit_failed", error=str(err), requests=len(works))
            return [(False, err)] * len(works)
        self.batches += 1
        self.writes += len(works)
        return outcomes

    async def data_version(self) -> int:
        """Changes whenever another connection (the CLI, our writer) commits: cheap to poll."""
        return await self.read(lambda c: int(c.execute("PRAGMA data_version").fetchone()[0]))
