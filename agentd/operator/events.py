"""Events as the operator sends and lists them (`agentd event send|list`): one is recorded once
per dedupe key, and sending says when nothing would start or wake for it. One transaction each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentd.config import Config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import NotFound
from agentd.models import JSON, Event, Goal, GoalStatus, RunStatus
from agentd.operator import hook_counts


def _nobody_listens(cfg: Config, c: Any, name: str, fields: JSON) -> str | None:
    """Why an event named `name` would start or wake nothing, or None when something listens:
    a waiting run, an agent's trigger, or the goal its `goal_id` names (its next check-in
    looks at the event: db/marks.py)."""
    waiting = q.list_runs(c, status=RunStatus.WAITING, limit=100_000)
    if any(run.wait and run.wait.get("event") == name for run in waiting):
        return None
    goal_id = fields.get("goal_id")
    if isinstance(goal_id, int) and not isinstance(goal_id, bool):
        try:
            goal: Goal | None = q.get_goal(c, goal_id)
        except NotFound:
            goal = None
        if goal is not None and goal.status in (GoalStatus.ACTIVE, GoalStatus.PAUSED):
            return None  # goal N's next check-in sees it
        state = "no such goal" if goal is None else f"goal {goal_id} is {goal.status}"
        return (
            f"its goal_id {goal_id} names no goal that checks in ({state}), and no agent "
            f"triggers on {name!r} nor does a run wait for it, so nothing sees it; "
            "`agentd goal list` shows the goals"
        )
    agents = sorted(a for a, agent in cfg.agents.items() if name in agent.triggers)
    if not agents:
        return (
            f"no agent triggers on {name!r} and no run waits for it, so it starts nothing; "
            + _nearest(cfg, waiting, name)
            + "add it "
            "to an agent's `triggers` in config.toml, then run `agentd reload`"
        )
    goals = q.list_goals(c, GoalStatus.ACTIVE)
    if not any(g.agent in agents for g in goals):
        return (
            f"{', '.join(agents)} {'triggers' if len(agents) == 1 else 'trigger'} on {name!r} "
            "but no active goal uses it, so it starts nothing; add one with `agentd goal add`"
        )
    return None


def _nearest(cfg: Config, waiting: list[Any], name: str) -> str:
    """`did you mean 'deploy'? `: the closest name an agent triggers on or a run waits for."""
    import difflib  # only when nothing listens: the CLI's start stays light

    known = {t for agent in cfg.agents.values() for t in agent.triggers}
    known |= {str(r.wait["event"]) for r in waiting if r.wait and r.wait.get("event")}
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def send(
    store: SyncStore, cfg: Config | None, name: str, fields: JSON, key: str | None
) -> tuple[Any, bool, str | None]:
    """Record an event from the command line: it, whether `key` was already recorded (then the
    first one is returned), and why nothing listens for it (checked only against a `cfg`)."""

    def work(c: Any) -> tuple[Any, bool, str | None]:
        event_id = qi.add_event(c, name, fields, key, source="cli")
        if event_id is None:
            assert key is not None  # only a dedupe key makes an insert a no-op
            return qi.event_by_key(c, key), True, None
        unheard = _nobody_listens(cfg, c, name, fields) if cfg is not None else None
        return qi.events_after(c, event_id - 1, 1)[0], False, unheard

    return store.write(work)


def receiving(
    source: str, events: list[tuple[str, JSON, str | None]], counts: dict[str, Any] | None = None
) -> Callable[[Any], int]:
    """The one transaction recording the events an inbound webhook delivery carries (name, data,
    dedupe key), as `send` records one — for the daemon's writer (`await store.write(...)`): the
    sender is answered only after it commits. It returns how many were new (a repeated
    notification records nothing twice). `counts` (refusals gathered since the last write, the
    last delivery) go to the hook's kept counts in the same transaction (hook_counts.py)."""

    def work(c: Any) -> int:
        new = sum(
            qi.add_event(c, n, data, key, source=source) is not None for n, data, key in events
        )
        if counts is not None:
            delta = {**counts, "accepted": 1, "recorded": new, "duplicates": len(events) - new}
            hook_counts.add(c, source.removeprefix("hook:"), delta)
        return new

    return work


def hook_deliveries(store: SyncStore) -> dict[str, tuple[int, Any]]:
    """Per hook source (`hook:NAME`): events recorded and when the last one was."""
    return store.read(qi.events_by_source)


def recent(store: SyncStore, limit: int) -> list[Event]:
    """The latest events, newest first."""
    return store.read(lambda c: qi.list_events(c, limit))
