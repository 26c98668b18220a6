"""Goals the outer loop's planning must not lose (issue 35's review): on PostgreSQL a goal can
commit after one with a higher id (two hosts, a sequence's cache), behind the planning cursor —
it is planned all the same; a paused or closed goal's look leaves the due-look index, and a
resumed goal is planned again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db.store import Store, SyncStore
from agentd.outer.service import Outer
from tests.conftest import Home

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0
CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[models.checker]
provider = "scripted"
replies = "checkins.json"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
model = "checker"
tz = "UTC"
jitter_s = 0
min_s = 3600
"""
NOTHING = {"reason": "quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}


def add(c: Any, title: str) -> int:
    return q.add_goal(c, title=title, why="tests", agent="default", criteria=[], deadline=None)


@pytest.fixture
async def outer(home: Home) -> AsyncIterator[Callable[[], Any]]:
    made: list[tuple[Store, Outer]] = []

    async def build() -> Outer:
        cfg = home.write_config(CONFIG, [{"action": {"kind": "finish"}}])
        (home.root / "checkins.json").write_text(json.dumps([NOTHING] * 50))
        home.store  # noqa: B018  # migrate before the async store opens
        store = Store(home.paths.db, backend=home.backend())
        await store.open()
        deps = daemon.build_deps(cfg, store, owner="test:1")
        deps.clock = ManualClock(T0)
        made.append((store, Outer(deps, lambda run_id, epoch: None)))
        return made[-1][1]

    yield build
    for store, o in made:
        await o.stop(1)
        await store.close()


def look(home: Home, goal_id: int) -> float | None:
    row = home.store.read(lambda c: qc.cadence_row(c, goal_id))
    return None if row is None else row["next_at"]


@pytest.mark.backends("postgres")
async def test_a_goal_committed_behind_the_cursor_is_planned(
    home: Home, outer: Callable[[], Any]
) -> None:
    o = await outer()
    await o.start()
    other = SyncStore(home.paths.db, backend=home.backend())  # a second host's `goal add`
    try:
        with other.transaction() as c:
            late = add(c, "committed late")  # its id comes first …
            early = home.store.write(lambda c: add(c, "committed first"))
            assert early > late
            o.wake()
            await o.tick()  # … the loop plans the later id, its cursor passes both
            assert look(home, early) is not None
        # … and then the lower id commits.
        o.wake()
        await o.tick()
        assert look(home, late) == T0 + HOUR
    finally:
        other.close()


@pytest.mark.backends
async def test_a_paused_goal_leaves_the_due_looks_and_is_planned_again_when_resumed(
    home: Home, outer: Callable[[], Any]
) -> None:
    from agentd.models import GoalStatus

    home.root.mkdir(parents=True)
    goals = home.store.write(lambda c: [add(c, f"goal {i}") for i in range(3)])
    home.store.write(lambda c: [qc.set_next(c, g, T0 - HOUR, "a look", T0) for g in goals])
    home.store.write(lambda c: q.set_goal_status(c, goals[0], GoalStatus.PAUSED))
    home.store.write(lambda c: q.set_goal_status(c, goals[1], GoalStatus.ABANDONED))
    due = "SELECT goal_id FROM cadences WHERE next_at <= ? ORDER BY goal_id"
    # Only the active goal's past look is left where the loop's search for due looks reads.
    assert home.store.read(lambda c: c.execute(due, (T0,)).fetchall()) == [(goals[2],)]
    assert home.store.read(lambda c: qc.cadence_row(c, goals[1]))["next_why"] == "goal abandoned"
    home.store.write(lambda c: q.set_goal_status(c, goals[0], GoalStatus.ACTIVE))
    o = await outer()
    await o.start()
    assert look(home, goals[0]) == T0 + HOUR  # resumed: a new first look, planned by the loop
    assert look(home, goals[1]) is None  # closed: never looked at again


async def test_a_tick_does_not_read_past_closed_goals(home: Home, outer: Callable[[], Any]) -> None:
    from agentd.models import GoalStatus
    from tests.outer.test_due_scan import Traced

    o = await outer()
    traced = Traced(o.deps.store)
    o.deps.store = traced  # type: ignore[assignment]
    await o.start()
    steps = []
    for n in (50, 2000):  # goals looked at once, then closed: their rows stay, parked

        def close(c: Any, n: int = n) -> None:
            for i in range(n):
                g = add(c, f"closed {i}")
                qc.set_next(c, g, T0 - HOUR, "a look", T0)
                q.set_goal_status(c, g, GoalStatus.ACHIEVED)

        home.store.write(close)
        for _ in range(10):  # the planning cursor passes the new ids
            o.wake()
            await o.tick()
        traced.steps = 0
        o.wake()
        await o.tick()
        steps.append(traced.steps)
    assert steps[1] <= steps[0] * 1.5 + 5, steps  # 40 times the closed goals, the same work


@pytest.mark.backends
def test_a_checkin_ending_after_pause_leaves_the_look_cleared(home: Home) -> None:
    from agentd.models import GoalStatus

    home.root.mkdir(parents=True)
    goal = home.add_goal()
    home.store.write(lambda c: q.set_goal_status(c, goal, GoalStatus.PAUSED))
    home.store.write(lambda c: qc.set_next(c, goal, T0 + HOUR, "the model's next look", T0))
    row = home.store.read(lambda c: qc.cadence_row(c, goal))
    assert (row["next_at"], row["next_why"]) == (None, "goal paused")
