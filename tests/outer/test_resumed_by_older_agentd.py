"""A goal resumed by an agentd older than migration 12 / 8 — on PostgreSQL that migration is not
breaking, so an older daemon or CLI may still write the store — leaves its schedules parked
(`next_fire_at` NULL) and only its cadence row reset (no look, no reason). The loop, planning that
goal's first look, makes its schedules due again: they fire by their misfire policy, not never."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import schedules as qs
from tests.conftest import Home
from tests.outer.support import HOUR, T0, paused_with_a_schedule, ticks
from tests.outer.test_planning_holes import outer  # noqa: F401


def resume_as_older_agentd_did(c: Any, goal_id: int) -> None:
    c.execute("UPDATE goals SET status = 'active' WHERE goal_id = ?", (goal_id,))
    c.execute("UPDATE cadences SET next_why = NULL WHERE goal_id = ? AND next_at IS NULL",
              (goal_id,))  # fmt: skip


@pytest.mark.backends
async def test_schedules_of_a_goal_an_older_agentd_resumed_fire_again(
    home: Home,
    outer: Any,  # noqa: F811
) -> None:
    goal, sched = paused_with_a_schedule(home)
    o = await outer()
    clock: Any = o.deps.clock
    await o.start()
    clock.set(T0 + 5 * HOUR)
    await ticks(o)
    home.store.write(lambda c: resume_as_older_agentd_did(c, goal))
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at is None
    await ticks(o, 3)
    rows = home.store.read(lambda c: qc.list_checkins(c, limit=100))
    ran = {r.due_at: r.status != "missed" for r in rows if r.schedule_id == sched}
    assert ran == {T0 - 2 * HOUR: False, T0: False, T0 + 2 * HOUR: False, T0 + 4 * HOUR: True}
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at == T0 + 6 * HOUR
