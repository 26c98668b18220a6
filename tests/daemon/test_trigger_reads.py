"""An event starts runs for the goals of the agents it triggers, reading only those goals (issue
35's review): the trigger pass's work does not grow with the goals of agents the event does not
trigger. On a real SQLite file, its virtual machine's steps counted (tests/outer/test_due_scan.py)."""

from __future__ import annotations

import pytest

from agentd.daemon import serve as daemon
from agentd.daemon.scheduler import Scheduler
from agentd.db import due as qd
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.models import GoalStatus
from tests.conftest import Home
from tests.outer.support import Traced

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.watcher]
actions = ["finish"]
triggers = ["alert"]

[agents.busy]
actions = ["finish"]
"""


async def test_an_event_reads_only_the_goals_of_the_agents_it_triggers(home: Home) -> None:
    cfg = home.write_config(CONFIG, [{"action": {"kind": "finish"}}])
    watched = home.add_goal(agent="watcher")
    store = Store(home.paths.db)
    await store.open()
    try:
        deps = daemon.build_deps(cfg, store, owner="test:1")
        traced = Traced(store)
        deps.store = traced  # type: ignore[assignment]
        launched: list[int] = []
        sched = Scheduler(deps, lambda run_id, epoch: launched.append(run_id))
        steps = []
        for n in (50, 2000):  # goals of an agent no event triggers
            home.store.write(lambda c, n=n: [
                q.add_goal(c, title=f"idle {i}", why="scale", agent="busy", criteria=[],
                           deadline=None) for i in range(n)])  # fmt: skip
            for run_id in launched:  # the watcher's run ends, so the next event starts one
                home.store.write(lambda c, r=run_id: c.execute(
                    "UPDATE runs SET status = 'succeeded' WHERE run_id = ?", (r,)))  # fmt: skip
            home.store.write(lambda c: qi.add_event(c, "alert", {}, None))
            traced.steps = 0
            await sched._start_triggered()
            steps.append(traced.steps)
        runs = home.store.read(lambda c: c.execute("SELECT goal_id FROM runs").fetchall())
        assert {g for (g,) in runs} == {watched} and len(runs) == 2
        assert steps[1] <= steps[0] * 1.5 + 5, steps  # 40 times the idle goals, the same work
    finally:
        await store.close()


@pytest.mark.backends
def test_active_goals_of_agents(home: Home) -> None:
    home.root.mkdir(parents=True)
    a, b, c_ = (home.add_goal(agent=n) for n in ("watcher", "busy", "watcher"))
    home.store.write(lambda c: q.set_goal_status(c, c_, GoalStatus.PAUSED))
    assert home.store.read(lambda c: qd.active_goals_of(c, ["watcher"])) == [(a, "watcher")]
    assert home.store.read(lambda c: qd.active_goals_of(c, ["watcher", "busy"])) == [
        (a, "watcher"), (b, "busy")]  # fmt: skip
