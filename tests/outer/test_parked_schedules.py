"""A paused or closed goal's schedules are parked (issue 35's leftover): their `next_fire_at`
leaves the due-schedule search's range, so a tick never reads past them however many there are;
resumed, a goal's schedules are due at once — what fell due meanwhile is recorded by each one's
misfire policy — and then fire on their own times again. On a manual clock."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.models import GoalStatus
from agentd.operator import goals as operator_goals
from tests.conftest import Home
from tests.outer.support import (
    CONFIG,
    HOUR,
    T0,
    Traced,
    add,
    paused_with_a_schedule,
    scheduled,
    steps_of_a_tick,
    ticks,
)
from tests.outer.test_planning_holes import outer  # noqa: F401


async def test_a_tick_does_not_read_past_paused_goals_schedules(
    home: Home,
    outer: Any,  # noqa: F811
) -> None:
    home.root.mkdir(parents=True)
    o = await outer()
    traced = Traced(o.deps.store)
    o.deps.store = traced  # type: ignore[assignment]
    await o.start()
    steps = []
    for n in (50, 2000):  # goals whose schedule was due an hour ago, paused before it fired

        def pause(c: Any, n: int = n) -> None:
            for i in range(n):
                g = add(c, f"paused {i}")
                qc.set_next(c, g, T0 + 30 * HOUR, "a look", T0)
                scheduled(c, g, T0 - HOUR)
                q.set_goal_status(c, g, GoalStatus.PAUSED)

        home.store.write(pause)
        steps.append(await steps_of_a_tick(o, traced))
    assert steps[1] <= steps[0] * 1.5 + 5, steps  # 40 times the paused goals, the same work
    fired = home.store.read(lambda c: qc.list_checkins(c, limit=10_000))
    assert fired == []  # and none of them fired


@pytest.mark.backends
async def test_a_resumed_goals_schedule_fires_by_its_policy_then_on_time(
    home: Home,
    outer: Any,  # noqa: F811
) -> None:
    goal, sched = paused_with_a_schedule(home)
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at is None  # parked
    o = await outer()
    clock: Any = o.deps.clock
    await o.start()
    clock.set(T0 + 5 * HOUR)  # fires at T0-2h, T0, T0+2h and T0+4h fall due while it is paused
    await ticks(o)
    assert home.store.read(lambda c: qc.list_checkins(c, limit=100)) == []
    home.store.write(lambda c: q.set_goal_status(c, goal, GoalStatus.ACTIVE))
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at == T0 - 4 * HOUR  # due now
    await ticks(o)
    rows = home.store.read(lambda c: qc.list_checkins(c, limit=100))
    by_status = sorted((r.status, r.due_at) for r in rows if r.schedule_id == sched)
    # misfire = once: the latest fire runs, those before it are recorded missed
    ran = {t: s != "missed" for s, t in by_status}
    assert ran == {T0 - 2 * HOUR: False, T0: False, T0 + 2 * HOUR: False, T0 + 4 * HOUR: True}
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at == T0 + 6 * HOUR  # on time


@pytest.mark.backends
def test_a_schedule_added_to_a_paused_goal_is_parked_until_it_resumes(home: Home) -> None:
    from agentd.operator import schedules as plan

    cfg = home.write_config(CONFIG, [])
    goal = home.store.write(lambda c: add(c, "backups"))
    operator_goals.set_status(home.store, goal, GoalStatus.PAUSED)
    out = plan.add_schedule(home.store, cfg, goal, plan.NewSchedule("interval", "7200", "UTC"))
    assert home.store.read(lambda c: qs.get(c, out["schedule_id"])).next_fire_at is None
    operator_goals.set_status(home.store, goal, GoalStatus.ACTIVE)
    assert home.store.read(lambda c: qs.get(c, out["schedule_id"])).next_fire_at is not None
