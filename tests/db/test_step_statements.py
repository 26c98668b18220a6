"""What a daemon's step costs the database in statements (issue 35: on PostgreSQL each is a round
trip to the server), on both engines: a journal step appended without its seq is one fenced
statement, a decision settled or an intent completed is one, the home's clock record is read
once per write transaction, and a request failing in a group commit costs its batch one commit
more (and its own transaction, rolled back) instead of one commit per request. Each keeps what
it guarded: the lease fence, the precise refusal, the request's outcome its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentd.db import leases, meta, stamp
from agentd.db import queries as q
from agentd.db.backend import Backend
from agentd.db.store import Store, SyncStore
from agentd.errors import NotFound, Refused
from agentd.models import StepKind, StepStatus

pytestmark = pytest.mark.backends


class Counted:
    """A connection that notes every statement it is asked to run."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sql: list[str] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self.sql.append(sql)
        return self.conn.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:  # dialect, IntegrityError, memo, executemany
        return getattr(self.conn, name)

    def besides_the_clock(self) -> list[str]:
        return [s for s in self.sql if "FROM meta" not in s]

    def clock_reads(self) -> int:
        return sum(1 for s in self.sql if "FROM meta" in s)


@pytest.fixture
def store(home: Any) -> SyncStore:
    home.root.mkdir(parents=True, exist_ok=True)
    return home.store  # type: ignore[no-any-return]


def claimed_run(store: SyncStore) -> tuple[int, int]:
    def work(c: Any) -> tuple[int, int]:
        goal = q.add_goal(c, title="g", why="w", agent="a", criteria=[], deadline=None)
        run = q.create_run(c, goal_id=goal, agent="a", trigger="cli")
        return run, leases.claim_run(c, run, "A", 30)

    return store.write(work)


def test_appending_the_next_step_is_one_statement_and_the_clock_is_read_once(
    store: SyncStore, backend: str
) -> None:
    run, epoch = claimed_run(store)

    def work(c: Any) -> tuple[list[int], Counted]:
        counted = Counted(c)
        seqs = [q.append_step(counted, run, epoch, StepKind.OBSERVE, data={}).seq for _ in "ab"]
        return seqs, counted

    seqs, counted = store.write(work)
    assert seqs == [2, 3]
    assert len(counted.besides_the_clock()) == 2  # was 3 each: the fence, max(seq), the insert
    # PostgreSQL reads the clock record once per transaction; SQLite's read costs no round trip.
    assert counted.clock_reads() == (1 if backend == "postgres" else 2)
    assert [s.seq for s in store.read(lambda c: q.list_steps(c, run))] == [1, 2, 3]


def test_the_next_step_is_refused_with_the_fence_s_reason(store: SyncStore) -> None:
    run, epoch = claimed_run(store)
    with pytest.raises(Refused, match="lease lost"):
        store.write(lambda c: q.append_step(c, run, epoch + 1, StepKind.OBSERVE, data={}))
    with pytest.raises(NotFound, match="no run"):
        store.write(lambda c: q.append_step(c, run + 99, epoch, StepKind.OBSERVE, data={}))
    store.write(lambda c: q.append_step(c, run, epoch, StepKind.FINISH, data={}))
    store.write(
        lambda c: c.execute("UPDATE runs SET status = 'succeeded' WHERE run_id = ?", (run,))
    )
    with pytest.raises(Refused, match="is succeeded"):
        store.write(lambda c: q.append_step(c, run, epoch, StepKind.OBSERVE, data={}))
    assert [s.kind for s in store.read(lambda c: q.list_steps(c, run))] == ["start", "finish"]


def test_settling_a_decision_and_completing_an_intent_are_one_statement_each(
    store: SyncStore,
) -> None:
    run, epoch = claimed_run(store)
    store.write(lambda c: q.append_step(c, run, epoch, StepKind.DECIDE, status=StepStatus.STARTED))
    store.write(
        lambda c: q.append_step(c, run, epoch, StepKind.ACT, status=StepStatus.STARTED, action="x")
    )

    def settle(c: Any) -> tuple[Any, Any, Counted]:
        counted = Counted(c)
        decided = q.settle_decision(
            counted, run, epoch, 2, status=StepStatus.DONE, data={"reason": "r"}, action="x",
            args={"a": 1}, digest="d",
        )  # fmt: skip
        done = q.complete_step(counted, run, epoch, 3, status=StepStatus.DONE, result={"ok": 1})
        return decided, done, counted

    decided, done, counted = store.write(settle)
    assert len(counted.besides_the_clock()) == 2  # was 3 each: the fence, the update, a read
    assert (decided.status, decided.action, decided.args, decided.data) == (
        "done", "x", {"a": 1}, {"reason": "r"},
    )  # fmt: skip
    assert (done.status, done.result, done.completed_at is not None) == ("done", {"ok": 1}, True)
    assert store.read(lambda c: q.get_step(c, run, 3)) == done


def test_settling_and_completing_keep_their_refusals(store: SyncStore) -> None:
    run, epoch = claimed_run(store)
    store.write(lambda c: q.append_step(c, run, epoch, StepKind.DECIDE, status=StepStatus.STARTED))
    with pytest.raises(Refused, match="lease lost"):
        store.write(
            lambda c: q.settle_decision(c, run, epoch + 1, 2, status=StepStatus.DONE, data={})
        )
    with pytest.raises(Refused, match="not awaiting a result"):  # a decision is no intent
        store.write(lambda c: q.complete_step(c, run, epoch, 1, status=StepStatus.DONE, result={}))
    store.write(lambda c: q.settle_decision(c, run, epoch, 2, status=StepStatus.DONE, data={}))
    with pytest.raises(Refused, match="not a decision awaiting its parse"):  # settled already
        store.write(lambda c: q.settle_decision(c, run, epoch, 2, status=StepStatus.DONE, data={}))
    store.write(lambda c: c.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?", (run,)))
    with pytest.raises(Refused, match="is failed"):
        store.write(lambda c: q.complete_step(c, run, epoch, 2, status=StepStatus.DONE, result={}))


def test_the_clock_record_written_in_a_transaction_is_the_one_it_then_stamps_with(
    store: SyncStore,
) -> None:
    def work(c: Any) -> tuple[float, float]:
        wall = stamp.now(c)
        meta.set_meta(c, stamp.KEY, '{"speed": 1.0, "wall0": 0.0, "sim0": 1000000.0}')
        return wall, stamp.now(c)

    wall, simulated = store.write(work)
    assert simulated >= wall + 1e6  # the new record, not the memo of the old one
    assert store.read(stamp.now) >= wall + 1e6


BackendAt = Callable[[Path], Backend]


async def test_a_failed_request_costs_its_batch_one_commit_more_not_one_per_request(
    tmp_path: Path, backend_at: BackendAt
) -> None:
    path = tmp_path / "agentd.db"
    store = Store(path, backend=backend_at(path))
    await store.open()
    held, queued = threading.Event(), threading.Event()

    def first(c: Any) -> None:  # holds the writer until the rest is queued: one batch of them
        held.set()
        queued.wait(30)

    def put(key: str, fail: bool = False) -> Callable[[Any], str]:
        def work(c: Any) -> str:
            meta.set_meta(c, key, "written")
            if fail:
                raise ValueError(f"{key} refused")  # after its write: rolled back with it
            return key

        return work

    blocker = asyncio.ensure_future(store.write(first))
    assert await asyncio.to_thread(held.wait, 30)
    writes = [put("a"), put("b"), put("c", fail=True), put("d"), put("e"), put("f")]
    pending = [asyncio.ensure_future(store.write(w)) for w in writes]
    await asyncio.sleep(0)  # every request queued behind `first`
    batches = store.batches
    queued.set()
    await blocker
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert results[:2] == ["a", "b"] and results[3:] == ["d", "e", "f"]
    assert isinstance(results[2], ValueError)
    # `first` committed alone; then a, b / c alone, rolled back / d, e, f: was one per request
    assert store.batches - batches == 1 + 2
    got = await store.read(lambda c: {k: meta.get_meta(c, k) for k in "abcdef"})
    assert got == {"a": "written", "b": "written", "c": "", "d": "written", "e": "written",
                   "f": "written"}  # fmt: skip
    await store.close()
