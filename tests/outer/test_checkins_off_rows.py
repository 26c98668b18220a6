"""Goals of an agent whose check-ins are off (issue 35's leftover): the loop parks their empty
cadence rows with a reason the first time it reads them, so no later tick reads past them however
many there are; turned on (a reload), they are planned like any new goal. On a manual clock and
a real SQLite file, SQLite's virtual machine steps counted as tests/outer/test_due_scan.py does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import due as qd
from agentd.outer.service import Outer
from tests.conftest import Home
from tests.outer.support import CONFIG, HOUR, T0, Outers, add, steps_of_a_tick

OFF = (
    CONFIG
    + """
[agents.off]
actions = ["notify", "finish"]

[agents.off.checkin]
enabled = {enabled}
model = "checker"
tz = "UTC"
jitter_s = 0
min_s = 3600
"""
)


@pytest.fixture
async def outer(home: Home) -> AsyncIterator[Callable[[], Any]]:
    outers = Outers(home)
    yield lambda: outers.build(
        OFF.format(enabled="false"), [{"action": {"kind": "finish"}}], backend=False, traced=True
    )
    await outers.close()


def add_off(c: Any, n: int) -> list[int]:
    return [add(c, f"off {i}", agent="off") for i in range(n)]


async def test_a_tick_does_not_read_past_goals_whose_checkins_are_off(
    home: Home, outer: Callable[[], Any]
) -> None:
    o = await outer()
    traced: Any = o.deps.store
    await o.start()
    steps = []
    for n in (50, 2000):
        home.store.write(lambda c, n=n: add_off(c, n))
        steps.append(await steps_of_a_tick(o, traced))
    assert steps[1] <= steps[0] * 1.5 + 5, steps  # 40 times the goals, the same work
    rows = home.store.read(lambda c: [qc.cadence_row(c, g) for g in range(1, 2051)])
    assert {(r["next_at"], r["next_why"]) for r in rows if r} == {(None, qd.OFF_WHY)}


async def test_goals_of_an_agent_whose_checkins_come_on_are_planned(
    home: Home, outer: Callable[[], Any]
) -> None:
    o = await outer()
    await o.start()
    goals = home.store.write(lambda c: add_off(c, 3))
    # A goal committed behind the planning cursor, or resumed: found through cadences_unplanned.
    o.wake()
    await o.tick()
    late = home.store.write(lambda c: add_off(c, 1))[0]
    home.store.write(lambda c: c.execute("UPDATE cadences SET next_why = NULL WHERE goal_id = ?",
                                         (goals[0],)))  # fmt: skip
    o.wake()
    await o.tick()
    for g in [*goals, late]:
        row = home.store.read(lambda c, g=g: qc.cadence_row(c, g))
        assert (row["next_at"], row["next_why"]) == (None, qd.OFF_WHY), g
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])  # a reload
    for _ in range(3):
        o.wake()
        await o.tick()
    looks = home.store.read(lambda c: [qc.cadence_row(c, g)["next_at"] for g in [*goals, late]])
    assert looks == [T0 + HOUR] * 4


async def started_with_checkins_on(home: Home, outer: Callable[[], Any]) -> tuple[Outer, Any]:
    """An outer loop started with the `off` agent's check-ins on, and its traced store."""
    o = await outer()
    o.deps.config = home.write_config(OFF.format(enabled="true"), [])
    await o.start()
    return o, o.deps.store
