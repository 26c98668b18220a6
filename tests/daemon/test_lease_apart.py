"""A lease is renewed on a connection of its own (agentd/db/store.py `write_apart`): a writer
stuck on a slow write — here, each of its writes waits for a row another session holds, until
the lock timeout — does not hold the renewals back, so the daemon does not fence itself and
kill its runs' commands. Real PostgreSQL, real engine, in-process."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg
import pytest

from agentd.daemon import serve as daemon
from agentd.daemon.leases import LeaseKeeper
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.errors import StateError
from agentd.runs.engine import Engine
from tests.daemon.test_lease_keeper import LEASE_S, Holding, until


@pytest.mark.backends("postgres")
async def test_a_stuck_writer_does_not_fence_the_daemon(home: Any) -> None:
    cfg = home.write_config(
        """
        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [agents.default]
        actions = ["finish"]
        """,
        replies=[{"action": {"kind": "finish", "outcome": "succeeded", "summary": "-"}}],
    )
    goal_id = home.store.write(
        lambda c: q.add_goal(c, title="t", why="w", agent="default", criteria=[], deadline=None)
    )
    run_id = home.store.write(
        lambda c: q.create_run(c, goal_id=goal_id, agent="default", trigger="hold")
    )
    store = Store(home.paths.db, backend=home.backend())
    await store.open()
    deps = daemon.build_deps(cfg, store, "me:1:test")
    deps.lease_s = LEASE_S
    engine = Engine(deps)
    engine.drivers["hold"] = Holding
    keeper = LeaseKeeper(deps, engine, shared=True)
    stop = asyncio.Event()
    blocker = psycopg.connect(home.store_url, autocommit=True)  # never timed out idle
    stuck = 0

    async def slow_writes() -> None:
        nonlocal stuck
        touch = "UPDATE goals SET updated_at = updated_at WHERE goal_id = ?"
        while not stop.is_set():
            stuck += 1
            with contextlib.suppress(StateError):  # the lock timeout, after seconds
                await store.write(lambda c: c.execute(touch, (goal_id,)))

    try:
        for run, epoch in await keeper.start():
            engine.launch(run, epoch)
        task = asyncio.create_task(keeper.run(stop))
        await until(lambda: run_id in engine.tasks, "the run driven")
        blocker.execute("BEGIN")  # the goal's row: every write of the writer waits for it
        blocker.execute("SELECT 1 FROM goals WHERE goal_id = %s FOR UPDATE", (goal_id,))
        writes = asyncio.create_task(slow_writes())
        await until(lambda: stuck >= 1, "the writer stuck")
        before = keeper.renewals
        fenced = []
        # Six renewals, two full leases, while the writer waits on the row all along.
        await until(lambda: fenced.append(engine.fenced) or keeper.renewals >= before + 6,
                    "renewals beside the stuck writer", timeout_s=45)  # fmt: skip
        assert not any(fenced) and run_id in engine.tasks
        stop.set()
        blocker.execute("ROLLBACK")
        await asyncio.wait_for(writes, 20)
        await asyncio.wait_for(task, 10)
    finally:
        blocker.close()
        await engine.stop(1)
        await store.close()
