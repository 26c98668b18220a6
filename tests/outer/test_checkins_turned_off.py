"""Check-ins turned off for an agent whose goals' looks were planned (issue 35's leftover (a)):
the reload's planning sweep parks those looks too — `next_at` NULL, the reason said — so a
tick no longer reads past them in the due-look index once their time has passed; turned on
again, they are planned like any new goal. On a manual clock, a real SQLite file, SQLite's virtual
machine steps counted as tests/outer/test_due_scan.py does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import due as qd
from tests.conftest import Home
from tests.outer.support import HOUR, T0, ticks
from tests.outer.test_checkins_off_rows import (  # noqa: F401
    OFF,
    add_off,
    outer,
    started_with_checkins_on,
)


async def test_looks_planned_before_checkins_were_turned_off_are_parked(
    home: Home,
    outer: Callable[[], Any],  # noqa: F811
) -> None:
    o, traced = await started_with_checkins_on(home, outer)

    goals = home.store.write(lambda c: add_off(c, 2000))
    await ticks(o, 12)  # planned: a first look an hour on
    assert home.store.read(lambda c: qc.cadence_row(c, goals[-1]))["next_at"] == T0 + HOUR
    traced.steps = 0
    await ticks(o, 1)
    empty = traced.steps  # a tick with nothing due
    o.deps.config = home.write_config(OFF.format(enabled="false"), [])  # a reload: off
    await ticks(o, 12)
    o.deps.clock.set(T0 + 3 * HOUR)  # their looks' time has passed
    await ticks(o, 1)
    traced.steps = 0
    await ticks(o, 1)
    assert traced.steps <= empty * 1.5 + 50, (traced.steps, empty)  # nothing read past
    rows = home.store.read(lambda c: [qc.cadence_row(c, g) for g in goals])
    assert {(r["next_at"], r["next_why"]) for r in rows} == {(None, qd.OFF_WHY)}
    assert home.store.read(lambda c: qc.list_checkins(c, limit=10)) == []
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])  # on again: planned
    await ticks(o, 12)
    looks = home.store.read(lambda c: {qc.cadence_row(c, g)["next_at"] for g in goals})
    assert looks == {T0 + 4 * HOUR}


@pytest.mark.backends
def test_the_sweep_parks_an_off_agents_planned_and_empty_rows_on_each_engine(home: Home) -> None:
    home.root.mkdir(parents=True)
    planned, empty, parked, on = home.store.write(lambda c: add_off(c, 4))
    home.store.write(lambda c: qc.set_next(c, planned, T0 + HOUR, "a look", T0))
    home.store.write(lambda c: qc.set_next(c, on, T0 + HOUR, "a look", T0))
    home.store.write(lambda c: c.execute("UPDATE goals SET agent = 'default' WHERE goal_id = ?",
                                         (on,)))  # fmt: skip
    home.store.write(lambda c: qd.park_off(c, [parked], T0))
    found, _, read, off = home.store.read(lambda c: qd.unplanned(c, 0, ["default"], 100))
    assert (found, read, off) == ([], 4, [planned, empty])
    home.store.write(lambda c: qd.park_off(c, off, T0))
    rows = home.store.read(lambda c: [qc.cadence_row(c, g) for g in (planned, empty, parked)])
    assert {(r["next_at"], r["next_why"]) for r in rows} == {(None, qd.OFF_WHY)}
    assert home.store.read(lambda c: qc.cadence_row(c, on))["next_at"] == T0 + HOUR
