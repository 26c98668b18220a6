"""Starting a build from the operator's side (`agentd build`): the goal must be active; the spec is
validated first (`spec.make_spec`). A build runs beside the goal's other runs."""

from __future__ import annotations

from typing import Any

from agentd.db import artifacts as qa
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import Refused
from agentd.models import JSON, GoalStatus, Run


def start(store: SyncStore, goal_id: int, spec: JSON) -> Run:
    """A new build run of an active goal; the daemon picks it up."""

    def work(c: Any) -> Run:
        goal = q.get_goal(c, goal_id)
        if goal.status == GoalStatus.PAUSED:
            raise Refused(f"goal {goal_id} is paused; `agentd goal resume {goal_id}` first")
        if goal.status != GoalStatus.ACTIVE:
            raise Refused(f"goal {goal_id} is {goal.status}; it takes no more builds")
        run_id = qa.create_build(c, goal_id=goal_id, agent=goal.agent, spec=spec)
        return q.get_run(c, run_id)

    return store.write(work)
