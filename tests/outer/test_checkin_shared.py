"""Two daemons on one database (a SQLite file, a PostgreSQL database) and one due check-in: it runs
once. The daemon that claimed it asks the model; the other, running the same check-in meanwhile,
finds the claim live and does nothing — no second model call, no second effect — and after the
first ends the row is let go, done."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db.store import Store
from agentd.llm import ModelReply, ModelRequest
from agentd.outer import checkin
from tests.outer import test_checkin
from tests.outer.test_checkin import (
    NOTHING,
    T0,
    Make,
    Recorder,
    first_snapshot,
    goal,
)

make = test_checkin.make  # the fixture: a home, its store, the check-in deps on a manual clock


class Held:
    """The first daemon's check-in model: holds its call until released."""

    def __init__(self, inner: Recorder) -> None:
        self.name = inner.name
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.entered.set()
        await self.release.wait()
        return await self.inner.complete(request)


@pytest.mark.backends
async def test_a_checkin_runs_once_across_two_daemons(make: Make) -> None:
    env = await make([NOTHING, NOTHING], checkin_more='first_look = "ask"\n')
    goal_id = goal(env)
    first_snapshot(env)
    env.clock.set(T0)
    checkin_id = env.write(lambda c: qc.add_due(c, goal_id, T0, T0))
    held = Held(env.model)
    env.deps.models["checker"] = held  # type: ignore[assignment]
    other_store = Store(env.home.paths.db)
    await other_store.open()
    try:
        other = daemon.build_deps(env.deps.config, other_store, owner="test:2")
        other.clock = env.clock
        other.models["checker"] = env.model  # a call from here would be counted too
        launched: list[Any] = []
        first = asyncio.create_task(checkin.run_checkin(env.deps, checkin_id, env.launch))
        await asyncio.wait_for(held.entered.wait(), 20)  # the first daemon is asking the model
        await asyncio.wait_for(
            checkin.run_checkin(other, checkin_id, lambda *a: launched.append(a)), 20
        )
        assert env.model.requests == [] and launched == []  # the second did nothing
        row = env.read(lambda c: qc.get(c, checkin_id))
        assert row.status == "deciding"
        held.release.set()
        await asyncio.wait_for(first, 20)
    finally:
        await other_store.close()
    assert len(env.model.requests) == 1
    assert env.read(lambda c: qc.get(c, checkin_id)).status == "done"
    claim = env.read(
        lambda c: c.execute(
            "SELECT claimed_by FROM checkins WHERE checkin_id = ?", (checkin_id,)
        ).fetchone()
    )
    assert claim[0] is None  # let go at the end
