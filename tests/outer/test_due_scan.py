"""The outer loop costs what is due, not what exists (issue 35): a tick reads no table whole (every
statement's query plan searches an index), its work does not grow with the number of idle goals,
first planning goes in bounded batches and says how far it has got, and spreading it misses no
check-in. On a manual clock and a real SQLite file (the query plans are SQLite's)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import due as qd
from agentd.db import glance, meta
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.outer import schedule, service
from tests.conftest import Home
from tests.outer.support import HOUR, T0, Outers

WHOLE_TABLE = ("SCAN goals", "SCAN g", "SCAN cadences", "SCAN k", "SCAN schedules", "SCAN s",
               "SCAN checkins", "SCAN x")  # fmt: skip


def add_goals(home: Home, n: int, *, planned_at: float | None) -> list[int]:
    home.root.mkdir(parents=True, exist_ok=True)

    def work(c: Any) -> list[int]:
        ids = []
        for i in range(n):
            g = q.add_goal(c, title=f"goal {i}", why="scale", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            if planned_at is not None:
                qc.set_next(c, g, planned_at + i, "a look", T0)
            ids.append(g)
        return ids

    return list(home.store.write(work))


Make = Callable[[], Any]


@pytest.fixture
async def outer(home: Home) -> AsyncIterator[Make]:
    outers = Outers(home)
    yield lambda: outers.build(looks=2000, backend=False, traced=True)
    await outers.close()


def plans(store: sqlite3.Connection, statements: list[str]) -> list[str]:
    return [
        f"{sql[:80]}: {row[3]}"
        for sql in statements
        if sql.lstrip().upper().startswith("SELECT")
        for row in store.execute("EXPLAIN QUERY PLAN " + sql)
    ]


async def test_tick_reads_no_table_whole(home: Home, outer: Make) -> None:
    add_goals(home, 300, planned_at=T0 + 10 * HOUR)
    o = await outer()
    await o.start()
    traced: Any = o.deps.store
    traced.sql.clear()
    o.wake()  # a full scan, as after a commit
    await o.tick()
    assert traced.sql
    found = plans(home.store.conn, traced.sql)  # type: ignore[arg-type]
    whole = [p for p in found if any(p.endswith(": " + w) or (": " + w + " ") in p
                                     for w in WHOLE_TABLE)]  # fmt: skip
    assert not whole, "\n".join(found)


async def test_tick_work_does_not_grow_with_idle_goals(home: Home, outer: Make) -> None:
    o = await outer()
    traced: Any = o.deps.store
    steps = []
    for n in (200, 2000):  # goals planned for tomorrow: nothing due
        add_goals(home, n, planned_at=T0 + 24 * HOUR)
        await o.start()
        for _ in range(10):  # the new goals' planning batches (they are planned already)
            await o.tick()
        traced.steps = 0
        o.wake()
        await o.tick()
        steps.append(traced.steps)
    assert steps[1] <= steps[0] * 1.5 + 5, steps  # ten times the goals, the same work


async def test_first_start_plans_in_batches_and_says_how_far(
    home: Home, outer: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "PLAN_BATCH", 40)
    add_goals(home, 160, planned_at=None)  # four full batches
    o = await outer()
    await o.start()  # before READY: one batch only
    unplanned = home.store.read(lambda c: c.execute(
        "SELECT count(*) FROM goals g LEFT JOIN cadences k USING (goal_id) WHERE k.next_at IS NULL"
    ).fetchone()[0])  # fmt: skip
    assert unplanned == 120
    assert home.store.read(lambda c: meta.get_meta(c, glance.PLANNING_KEY)) == "40 160 0"
    for _ in range(10):
        await o.tick()
    assert home.store.read(lambda c: meta.get_meta(c, glance.PLANNING_KEY)) == "160 160 1"
    looks = home.store.read(lambda c: [qc.cadence_row(c, g) for g in range(1, 161)])
    assert all(r is not None and r["next_at"] == T0 + HOUR for r in looks)


async def test_spread_planning_and_firing_miss_no_checkin(
    home: Home, outer: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More goals than a batch, each with a schedule due at start and a look due an hour later:
    every fire is recorded and run, none missed, and no look is left due unrecorded."""
    monkeypatch.setattr(service, "PLAN_BATCH", 25)
    monkeypatch.setattr(service, "FIRE_BATCH", 25)
    goals = add_goals(home, 120, planned_at=None)
    spec = schedule.parse_spec("interval", "7200", "UTC")

    def schedules(c: Any) -> None:
        for g in goals:
            qs.add(c, g, kind=spec.kind, spec=spec.spec, tz="UTC", misfire=spec.misfire,
                   misfire_cap=spec.misfire_cap, max_lateness_s=spec.max_lateness_s,
                   jitter_s=0, now=T0 - 7200, next_fire_at=T0 - 1)  # fmt: skip

    home.store.write(schedules)
    o = await outer()
    o.fires.grace_s = 60.0  # found within a minute of its time: on time
    clock: Any = o.deps.clock
    clock.set(T0 - 1)  # the daemon was up: due now, not missed while down
    await o.start()
    for _ in range(20):
        await o.tick()
        if o.tasks:
            await asyncio.wait(list(o.tasks.values()))
    clock.set(T0 + HOUR + 1)
    for _ in range(40):
        await o.tick()
        if o.tasks:
            await asyncio.wait(list(o.tasks.values()))
    rows = home.store.read(lambda c: qc.list_checkins(c, limit=100_000))
    assert not [r for r in rows if r.status == "missed"]
    assert {r.goal_id for r in rows if r.schedule_id is not None} == set(goals)  # each fire
    assert all(r.status == "done" for r in rows)
    # Every goal is planned, and no look is left due unrecorded.
    looks = home.store.read(lambda c: [qc.cadence_row(c, g) for g in goals])
    assert all(r is not None and r["next_at"] is not None for r in looks)
    assert home.store.read(lambda c: qd.looks(c, clock.now(), ["default"], 1000)) == []
