"""One daemon on a shared store takes no more runs than `max_concurrent_runs`, even when its two
claimers run at once: the scheduler adopting new runs (no owner) and the lease keeper claiming
lapsed ones (which also takes runs with no owner). Each counted the free slots before either had
launched what it took, so together they could take twice the limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.daemon import serve as daemon
from agentd.daemon.leases import LeaseKeeper
from agentd.daemon.scheduler import Scheduler
from agentd.db import leases
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.runs.engine import Engine
from tests.daemon.test_lease_keeper import Holding

MOST = 3


@pytest.mark.backends("postgres")
async def test_the_two_claimers_together_take_no_more_than_the_free_slots(home: Any) -> None:
    cfg = home.write_config(
        f"""
        [daemon]
        max_concurrent_runs = {MOST}

        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [agents.default]
        actions = ["finish"]
        """,
        replies=[{"action": {"kind": "finish", "outcome": "succeeded", "summary": "-"}}],
    )

    def runs(c: Any) -> list[int]:
        made = []
        for i in range(3 * MOST):
            goal = q.add_goal(c, title=f"g{i}", why="w", agent="default", criteria=[],
                              deadline=None)  # fmt: skip
            made.append(q.create_run(c, goal_id=goal, agent="default", trigger="hold"))
        return made

    store = Store(home.paths.db, backend=home.backend())
    await store.open()
    deps = daemon.build_deps(cfg, store, "me:1:test")
    engine = Engine(deps)
    engine.drivers["hold"] = Holding
    keeper = LeaseKeeper(deps, engine, shared=True)
    scheduler = Scheduler(deps, engine.launch, engine.live)
    try:
        assert await keeper.start() == []  # registers the daemon (no runs yet)
        home.store.write(runs)  # runs with no owner: both claimers may take them
        # both count the free slots before either has launched what it took
        await asyncio.gather(scheduler._adopt_new_runs(), keeper.claim_lapsed())
        held = home.store.read(lambda c: leases.held_run_ids(c, "me:1:test"))
        assert len(held) == MOST, held
        assert len(engine.live()) == MOST
    finally:
        await engine.stop(1)
        await store.close()
