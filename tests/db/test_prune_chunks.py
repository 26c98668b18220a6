"""Retention prunes in bounded chunks (issue 31): on PostgreSQL every statement runs under
`statement_timeout` (the lease, at least 5 s), so one DELETE of a year of journal could be
cancelled at every hour, for ever, while holding the writers behind it. `meta.prune` and
`outbox.prune` delete at most `limit` rows of a table (the steps of at most `limit` runs) per
call, and `Store.write_chunks` commits chunk after chunk, each its own transaction, until one
drops nothing."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentd.db import leases, meta, outbox
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db.backend import Backend
from agentd.db.conn import Conn
from agentd.db.store import Store
from agentd.models import RunStatus

pytestmark = pytest.mark.backends
RUNS, STEPS_PER_RUN, EVENTS, LIMIT = 30, 3, 45, 10


def arrange(c: Conn) -> list[int]:
    """RUNS finished runs of long ago with their steps, one live run, EVENTS old events."""
    goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
    old = []
    for _ in range(RUNS):
        run = q.create_run(c, goal_id=goal, agent="a", trigger="t")
        epoch = leases.claim_run(c, run, "me", 60)
        for seq in range(STEPS_PER_RUN - 2):  # + the START and FINISH steps
            c.execute(
                "INSERT INTO steps (run_id, seq, kind, status, created_at)"
                " VALUES (?, ?, 'observe', 'done', 1000)",
                (run, 100 + seq),
            )
        qt.finish(c, run, epoch, RunStatus.SUCCEEDED, "done long ago")
        old.append(run)
    c.execute("UPDATE runs SET updated_at = 1000")
    q.create_run(c, goal_id=goal, agent="a", trigger="t")  # live: its steps stay
    for i in range(EVENTS + 1):  # the newest event always stays
        c.execute("INSERT INTO events (name, created_at) VALUES (?, 1000)", (f"e{i}",))
    return old


@pytest.fixture
async def store(tmp_path: Path, backend_at: Callable[[Path], Backend]) -> AsyncIterator[Store]:
    path = tmp_path / "agentd.db"
    opened = Store(path, backend=backend_at(path))
    await opened.open()
    yield opened
    await opened.close(5)


async def test_a_large_prune_completes_in_bounded_chunks(
    store: Store,
) -> None:
    old = await store.write(arrange)
    steps = sum([len(await store.read(functools.partial(q.list_steps, run_id=r))) for r in old])
    assert steps >= RUNS * STEPS_PER_RUN
    chunks: list[int] = []

    def chunk(c: Conn) -> int:
        chunks.append(meta.prune(c, older_than=2000, limit=LIMIT))
        return chunks[-1]

    batches = store.batches
    pruned = await store.write_chunks(chunk)
    assert pruned == sum(chunks) == steps + EVENTS
    assert chunks[-1] == 0 and all(chunks[:-1])  # until one dropped nothing
    # Each chunk at most LIMIT rows of a table: the steps of LIMIT runs, LIMIT events.
    assert max(chunks) <= LIMIT * STEPS_PER_RUN + LIMIT
    assert len(chunks) >= RUNS // LIMIT + 1
    assert store.batches - batches == len(chunks)  # each its own transaction
    for run in old:
        assert await store.read(functools.partial(q.list_steps, run_id=run)) == []
    left = await store.read(lambda c: c.execute("SELECT count(*) FROM events").fetchone()[0])
    assert left == 1


async def test_the_outbox_prunes_in_chunks_too(
    store: Store,
) -> None:

    def sent(c: Conn) -> None:
        for i in range(25):
            c.execute(
                "INSERT INTO outbox (dedupe_key, channel, message, status, next_attempt_at,"
                " created_at) VALUES (?, 'mail', '{}', 'sent', 1000, 1000)",
                (f"k{i}",),
            )

    await store.write(sent)
    chunks: list[int] = []

    def chunk(c: Conn) -> int:
        chunks.append(outbox.prune(c, older_than=2000, limit=LIMIT))
        return chunks[-1]

    assert await store.write_chunks(chunk) == 25
    assert chunks == [10, 10, 5, 0]
