"""Goals the outer loop's planning must not lose (issue 35's review): on PostgreSQL a goal can
commit after one with a higher id (two hosts, a sequence's cache), behind the planning cursor —
it is planned all the same; a paused or closed goal's look leaves the due-look index, and a
resumed goal is planned again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db.store import SyncStore
from tests.conftest import Home
from tests.outer.support import HOUR, T0, Outers, Traced, add, steps_of_a_tick


@pytest.fixture
async def outer(home: Home) -> AsyncIterator[Callable[[], Any]]:
    outers = Outers(home)
    yield lambda: outers.build(replies=[{"action": {"kind": "finish"}}])
    await outers.close()


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
        steps.append(await steps_of_a_tick(o, traced))
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
