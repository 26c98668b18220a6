"""Schedules of goals whose agent's check-ins are off are parked with their looks (issue 35's
leftover): `due.park_off` takes their `next_fire_at` out of the due-schedule search's range, so a
tick does not read past them once their time has passed; turned on again (a reload), they are
due at once and what fell due meanwhile is recorded by each one's misfire policy (catch-up counts
from `last_fired_at`, as for a resumed goal). On a manual clock, a real SQLite file, SQLite's
virtual machine steps counted as tests/outer/test_due_scan.py does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import due as qd
from agentd.db import schedules as qs
from tests.conftest import Home
from tests.outer.support import HOUR, T0, scheduled, ticks
from tests.outer.test_checkins_off_rows import (  # noqa: F401
    OFF,
    add_off,
    outer,
    started_with_checkins_on,
)


async def test_schedules_of_goals_whose_checkins_are_off_are_parked(
    home: Home,
    outer: Callable[[], Any],  # noqa: F811
) -> None:
    o, traced = await started_with_checkins_on(home, outer)

    await ticks(o, 2)
    traced.steps = 0
    await ticks(o, 1)
    empty = traced.steps  # a tick with nothing due and no goals

    def fill(c: Any) -> list[int]:
        goals = add_off(c, 2000)
        return [scheduled(c, g, T0 + 2 * HOUR) for g in goals]

    o.deps.config = home.write_config(OFF.format(enabled="false"), [])  # a reload: off
    schedules = home.store.write(fill)
    await ticks(o, 12)  # the planning sweep reads (and parks) the new goals
    o.deps.clock.set(T0 + 3 * HOUR)  # their schedules' fire has passed
    await ticks(o, 1)
    traced.steps = 0
    await ticks(o, 1)
    assert traced.steps <= empty * 1.5 + 50, (traced.steps, empty)  # nothing read past
    parked = home.store.read(lambda c: {qs.get(c, s).next_fire_at for s in schedules[:5]})
    assert parked == {None}
    assert home.store.read(lambda c: qc.list_checkins(c, limit=10)) == []
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])  # on again: caught up
    await ticks(o, 12)
    fired = home.store.read(lambda c: qc.list_checkins(c, limit=10_000))
    assert {r.schedule_id for r in fired} == set(schedules)  # each once, by its policy
    later = home.store.read(lambda c: {qs.get(c, s).next_fire_at for s in schedules})
    assert later == {T0 + 4 * HOUR}  # and then on its own times


@pytest.mark.backends
def test_park_off_parks_the_schedules_and_planning_unparks_them_on_each_engine(
    home: Home,
) -> None:
    home.root.mkdir(parents=True)

    def fill(c: Any) -> tuple[int, int]:
        (goal,) = add_off(c, 1)
        return goal, scheduled(c, goal, T0 - HOUR)

    goal, sched = home.store.write(fill)
    home.store.write(lambda c: qd.park_off(c, [goal], T0))
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at is None
    home.store.write(lambda c: qs.unpark(c, goal))  # what planning does once they are on
    assert home.store.read(lambda c: qs.get(c, sched)).next_fire_at == T0 - 4 * HOUR
