"""Check-ins turned off for an agent whose goals' looks were planned (issue 35's leftover (a)):
the reload's planning sweep parks those looks too — `next_at` NULL, the reason said — so a
tick no longer reads past them in the due-look index once their time has passed; turned on
again, they are planned like any new goal. On a manual clock, a real SQLite file, SQLite's virtual
machine steps counted as tests/outer/test_due_scan.py does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentd.db import checkins as qc
from agentd.db import due as qd
from tests.conftest import Home
from tests.outer.test_checkins_off_rows import OFF, add_off, outer  # noqa: F401
from tests.outer.test_planning_holes import HOUR, T0


async def test_looks_planned_before_checkins_were_turned_off_are_parked(
    home: Home,
    outer: Callable[[], Any],  # noqa: F811
) -> None:
    o = await outer()
    traced: Any = o.deps.store
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])
    await o.start()

    async def ticks(n: int) -> None:
        for _ in range(n):
            o.wake()
            await o.tick()

    goals = home.store.write(lambda c: add_off(c, 2000))
    await ticks(12)  # planned: a first look an hour on
    assert home.store.read(lambda c: qc.cadence_row(c, goals[-1]))["next_at"] == T0 + HOUR
    traced.steps = 0
    await ticks(1)
    empty = traced.steps  # a tick with nothing due
    o.deps.config = home.write_config(OFF.format(enabled="false"), [])  # a reload: off
    await ticks(12)
    o.deps.clock.set(T0 + 3 * HOUR)  # their looks' time has passed
    await ticks(1)
    traced.steps = 0
    await ticks(1)
    assert traced.steps <= empty * 1.5 + 50, (traced.steps, empty)  # nothing read past
    rows = home.store.read(lambda c: [qc.cadence_row(c, g) for g in goals])
    assert {(r["next_at"], r["next_why"]) for r in rows} == {(None, qd.OFF_WHY)}
    assert home.store.read(lambda c: qc.list_checkins(c, limit=10)) == []
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])  # on again: planned
    await ticks(12)
    looks = home.store.read(lambda c: {qc.cadence_row(c, g)["next_at"] for g in goals})
    assert looks == {T0 + 4 * HOUR}
