"""The daemon's Writer on any Backend: one connection on one thread, committing what queued up as
one group.

Writes queue up while the previous batch commits; the next batch runs as ONE write transaction
(SQLite's `BEGIN IMMEDIATE`, PostgreSQL's `BEGIN`: one fsync); if one request fails, the batch
is rolled back and redone one request per transaction, so a failure never sinks its
neighbours. No caller resumes before its batch is durable.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import structlog

from agentd.db import faults, safety
from agentd.db.conn import Conn, Work
from agentd.db.outage import Deadline
from agentd.db.writer import Insert
from agentd.errors import AgentdError, StateError

if TYPE_CHECKING:
    from agentd.db.backend import Backend

log = structlog.get_logger("agentd.db")

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
    # The fence's row lock (PostgreSQL's FOR SHARE; nothing on SQLite, whose writers are serial)
    sql = rows[0].sql.replace(Insert.FENCE, conn.dialect.fence_lock)
    inserted = conn.executemany(sql, [r.params for r in rows]).rowcount
    if inserted != len(rows):
        if len(rows) == 1:
            rows[0].explain(conn)
        raise StateError(f"{len(rows) - inserted} of {len(rows)} fenced rows were not inserted")


class _RequestFailed(Exception):
    """The request(s) at `at` (a run of Inserts shares one statement) raised in a group commit:
    the batch is rolled back and redone around them."""

    def __init__(self, at: slice) -> None:
        super().__init__(f"requests {at.start}..{at.stop - 1} failed")
        self.at = at


class GroupWriter:
    """The Writer of the daemon's Store. `check` looks for corruption before migrating (at
    start); `errors` counts the database errors callers saw (shared with the Store's reader)."""

    def __init__(self, backend: Backend, *, check: bool, errors: safety.ErrorRate) -> None:
        self.backend = backend
        self.check = check
        self.errors = errors
        self._conn: Conn | None = None
        self._queue: collections.deque[Request] = collections.deque()
        self._ready = threading.Event()  # set when the queue may hold work (or we are closing)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._watch: Deadline | None = None
        self.batches = 0
        self.writes = 0

    async def open(self) -> None:
        """Open the connection (migrating first) on the writer's own thread."""
        self._loop = asyncio.get_running_loop()
        opened: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._main, args=(opened,), name="agentd-writer", daemon=True
        )
        self._thread.start()
        await opened

    def submit(self, work: Work[Any] | Insert, fut: asyncio.Future[Any]) -> None:
        self._queue.append((work, fut))
        self._ready.set()

    async def close(self, timeout_s: float | None = None) -> bool:
        """Commit what is queued, then close the connection and end the thread; False when the
        thread had not ended after `timeout_s` (a database that never answers: the batch's
        deadline and the failed reconnections fail what is left, but the last writes are lost)."""
        self._closing = True
        if self._thread is not None:
            self._ready.set()
            await asyncio.to_thread(self._thread.join, timeout_s)
            return not self._thread.is_alive()
        return True

    def _main(self, opened: asyncio.Future[None]) -> None:
        """The writer thread: take everything queued, commit it as one batch, hand the outcomes
        back to the loop in one call, repeat. It runs beside the event loop, so while a batch
        commits, the loop already queues the next one: the two overlap instead of taking turns.
        """
        loop = self._loop
        assert loop is not None
        try:
            self._conn = self.backend.open_migrated(check=self.check)
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
                    self._reopen_if_broken()
                    with self._deadline():
                        outcomes = self._commit(batch)
                except Exception as e:  # never let the writer die: every caller gets an answer
                    err = self._translated(e)
                    self.errors.record(e)
                    self._log_error("db.writer_failed", error=str(err), requests=len(batch))
                    outcomes = [(False, err)] * len(batch)
                settled = [
                    (fut, ok, value) for (_, fut), (ok, value) in zip(batch, outcomes, strict=True)
                ]
                loop.call_soon_threadsafe(_settle, settled)
            # Checked after every pass: close() may have set the event before our clear().
            if self._closing and not self._queue:
                break
        self._conn.close()

    def _commit(self, batch: list[Request]) -> list[tuple[bool, Any]]:
        """Commit a batch as one transaction. If a request fails, the batch is rolled back and
        redone around it: the requests before it as one transaction (they had gone through),
        the failed one alone, then the rest as a batch again — each request sees what the
        earlier ones committed, as if all ran one by one, but a refusal costs one commit more
        (and its own transaction), not one commit per request. (A refused action is a work
        function raising: routine.)

        The fast path has no per-request savepoints (they would double the statements); work
        functions only touch the database, so re-running them after a rollback is safe.
        """
        works = [w for w, _ in batch]
        try:
            return self._transaction(works, isolate=False)
        except _RequestFailed as failed:
            cut = failed.at
        # A connection lost under the batch (a restart, a reset) is no request's fault: it is
        # opened again first (failing that is the outage's, said once), never redone on the dead
        # one. The redo is timed on the connection it runs on (the batch's deadline timed the
        # old one).
        self._reopen_if_broken()
        with self._deadline():
            return self._redo(works, cut)

    def _redo(self, works: list[Work[Any] | Insert], cut: slice) -> list[tuple[bool, Any]]:
        """Redo a batch around its failed request `cut`: those before it as one transaction,
        it alone, then the rest as a batch again (around its next failure the same way)."""
        outcomes: list[tuple[bool, Any]] = []
        while True:
            before, at = works[: cut.start], works[cut]
            try:
                outcomes += self._transaction(before, isolate=False) if before else []
            except _RequestFailed:  # went through a moment ago: now one by one
                outcomes += [self._transaction([w], isolate=True)[0] for w in before]
            outcomes += [self._transaction([w], isolate=True)[0] for w in at]
            works = works[cut.stop :]
            if not works:
                return outcomes
            try:
                return outcomes + self._transaction(works, isolate=False)
            except _RequestFailed as failed:
                cut = failed.at

    def _transaction(
        self, works: list[Work[Any] | Insert], *, isolate: bool
    ) -> list[tuple[bool, Any]]:
        conn = self._conn
        assert conn is not None
        outcomes: list[tuple[bool, Any]] = []
        try:
            self.backend.begin_write(conn)
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
                        raise _RequestFailed(slice(i, i + max(n, 1))) from e
                    self.errors.record(e)
                    self._leave_a_standby(e)
                    self._rollback(conn)  # a full disk may have rolled it back already
                    return [(False, self._translated(e))]
                i += max(n, 1)
            conn.execute("COMMIT")
        except _RequestFailed:
            self._rollback(conn)  # an I/O error or a full disk may have rolled back already
            raise
        except self.backend.Error as e:
            self.errors.record(e)
            self._rollback(conn)
            self._leave_a_standby(e)
            err: AgentdError = self.backend.translate(e)
            self._log_error("db.commit_failed", error=str(err), requests=len(works))
            return [(False, err)] * len(works)
        if self.errors.outage is not None:
            self.errors.outage.reached()
        self.batches += 1
        self.writes += len(works)
        return outcomes

    def _reopen_if_broken(self) -> None:
        """A connection the server closed (a restart, a failover, a session ended for idling in a
        transaction while this process was frozen) is opened again before the next batch."""
        if self._conn is None or not self.backend.broken(self._conn):
            return
        outage = self.errors.outage
        if outage is not None and outage.retry_in() > 0:  # backoff: no connection storm
            raise StateError(outage.describe() or f"{self.backend.label}: unreachable")
        if outage is None or not outage.down:  # said once: not at every attempt of an outage
            log.warning("db.reconnecting", database=self.backend.label)
        with contextlib.suppress(self.backend.Error):
            self._conn.close()
        try:
            self._conn = self.backend.connect()
        except StateError as e:
            if outage is not None:
                outage.failed(str(e))
            raise

    @contextlib.contextmanager
    def _deadline(self) -> Iterator[None]:
        """A batch the database has not answered within the backend's deadline is cut off: its
        callers get the error, and the next batch opens a new connection (a stalled server or a
        blackholed route answers nothing, a cancel included)."""
        limit = self.backend.batch_deadline_s
        if limit is None or self._conn is None:
            yield
            return
        if self._watch is None:
            self._watch = Deadline(limit, self.backend.abort, "writer batch")
        with self._watch.timing(self._conn):
            yield

    def _log_error(self, event: str, **kw: Any) -> None:
        """An error, unless it is part of an outage already said (db/outage.py)."""
        outage = self.errors.outage
        (log.debug if outage is not None and outage.down else log.error)(event, **kw)

    def _leave_a_standby(self, error: Exception) -> None:
        """A shared database that refuses writes as read-only is a standby now (a failover
        demoted it): the connection is closed, and the next batch opens one to the primary the
        URL leads to (`target_session_attrs=read-write` with several hosts)."""
        if self.errors.outage is None or self._conn is None:
            return
        judged = self.errors.judge(error, self.errors.path)
        if judged is not None and judged[0] == faults.Fault.READ_ONLY:
            log.warning("db.read_only", database=self.backend.label, note="reconnecting")
            with contextlib.suppress(Exception):
                self._rollback(self._conn)
                self._conn.close()

    def _rollback(self, conn: Conn) -> None:
        try:
            if self.backend.in_transaction(conn):
                conn.execute("ROLLBACK")
        except self.backend.Error as e:  # the connection itself is gone: the next BEGIN says so
            log.warning("db.rollback_failed", error=str(self.backend.translate(e)))

    def _translated(self, e: Exception) -> Exception:
        return self.backend.translate(e) if isinstance(e, self.backend.Error) else e
