"""The operator's operations on goals and runs: add, move and close goals, start and cancel runs.

Each is one short transaction, like the inbox's (agentd/inbox.py): closing a goal cancels its active
runs in the same transaction, and cancelling a run withdraws its open questions and approvals. The
daemon notices within a second, or at its next start if it is stopped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentd.db import accounting
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import Refused
from agentd.models import Goal, GoalStatus, Run, Step

ALL_RUNS = 1_000_000


def add(
    store: SyncStore,
    *,
    title: str,
    why: str,
    agent: str,
    criteria: list[str],
    deadline: datetime | None = None,
) -> Goal:
    when = deadline.timestamp() if deadline is not None else None

    def work(c: Any) -> Goal:
        goal_id = q.add_goal(c, title=title, why=why, agent=agent, criteria=criteria, deadline=when)
        return q.get_goal(c, goal_id)

    return store.write(work)


def details(store: SyncStore, goal_id: int) -> tuple[Goal, list[Run], dict[str, int]]:
    """A goal, all its runs (newest first) and the model tokens they spent."""

    def read(c: Any) -> tuple[Goal, list[Run], dict[str, int]]:
        goal = q.get_goal(c, goal_id)
        runs = q.list_runs(c, goal_id=goal_id, limit=ALL_RUNS)
        return goal, runs, accounting.goal_spend(c, goal_id)

    return store.read(read)


def run_details(store: SyncStore, run_id: int) -> tuple[Run, Goal, list[Step]]:
    """A run, its goal and its journal (for `agentd runs show`)."""

    def read(c: Any) -> tuple[Run, Goal, list[Step]]:
        run = q.get_run(c, run_id)
        return run, q.get_goal(c, run.goal_id), q.list_steps(c, run_id)

    return store.read(read)


def set_status(store: SyncStore, goal_id: int, status: GoalStatus) -> Goal:
    """Pause or resume a goal (closing goes through `close`, which also cancels runs)."""
    return store.write(lambda c: q.set_goal_status(c, goal_id, status))


def close(store: SyncStore, goal_id: int, status: GoalStatus) -> list[int]:
    """Close a goal as achieved or abandoned and cancel its active runs; returns their ids."""
    reason = f"goal {goal_id} closed as {status} by the operator"

    def work(c: Any) -> list[int]:
        q.set_goal_status(c, goal_id, status)
        runs = q.list_runs(c, goal_id=goal_id, limit=ALL_RUNS)
        active = [r.run_id for r in runs if not r.status.finished]
        for run_id in active:
            _cancel(c, run_id, reason)
        return active

    return store.write(work)


def start_run(store: SyncStore, goal_id: int) -> Run:
    """A new run of an active goal that has none running or waiting; the daemon picks it up."""

    def work(c: Any) -> Run:
        goal = q.get_goal(c, goal_id)
        if goal.status == GoalStatus.PAUSED:
            raise Refused(f"goal {goal_id} is paused; `agentd goal resume {goal_id}` first")
        if goal.status != GoalStatus.ACTIVE:
            raise Refused(f"goal {goal_id} is {goal.status}; it takes no more runs")
        if (active := q.active_run_of_goal(c, goal_id)) is not None:
            raise Refused(
                f"goal {goal_id} already has run {active}; see `agentd runs show {active}`"
            )
        run_id = q.create_run(c, goal_id=goal_id, agent=goal.agent, trigger="operator")
        return q.get_run(c, run_id)

    return store.write(work)


def cancel_run(store: SyncStore, run_id: int, reason: str) -> None:
    store.write(lambda c: _cancel(c, run_id, reason))


def _cancel(c: Any, run_id: int, reason: str) -> None:
    """Cancel a run and withdraw its open questions/approvals, which no one could use any more."""
    q.cancel(c, run_id, reason)
    qi.withdraw_open_items(c, run_id, reason)
