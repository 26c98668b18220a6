"""Watched states: what a poll of an agent's world records, and which goals it starts runs for.

A poll is one transaction (`record_poll`): the snapshot, an event per change of state, and the
runs a flip of health wakes. A trigger naming a source's state (`health.unhealthy`) holds while
the source is in that state; an active goal whose trigger holds is `due` once per episode (one
stretch of that state, `sources.episode_key`), and `start_due` records the episode with the goal
and starts its run. The scheduler (agentd/daemon/scheduler.py) calls these inside its writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from agentd.config import Config
from agentd.db import items as qi
from agentd.db import leases, meta, stamp
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import waits as qw
from agentd.db import world as worlds
from agentd.models import JSON, InboxStatus
from agentd.runs import claims, control
from agentd.runs.deps import LEASE_S
from agentd.sources import episode_key, state_changes, state_of, transitions

log = structlog.get_logger("agentd.scheduler")


def record_poll(
    c: Any,
    agent: str,
    raw: JSON,
    owner: str,
    now: float,
    *,
    wake_runs: bool,
    lease_s: float = LEASE_S,
) -> list[tuple[int, int]]:
    """One transaction: the snapshot, an event per change of state (`SOURCE.STATE`), and the
    runs a flip of health wakes. A broken check (`check_failed`) is an event but wakes nothing:
    it says nothing about the service.

    Daemons sharing a database each poll; one at a time records (the agent's singleton), so each
    compares with the snapshot before it and a change of state is one event, not one per daemon."""
    c.dialect.singleton(c, f"poll:{agent}")
    snapshot_id, world, _diff, before = control.record_world(c, agent, None, raw, now)
    for source, state in state_changes(before, world):
        data = state_data(agent, source, world[source])
        key = f"poll:{agent}:{snapshot_id}:{source}"
        qi.add_event(c, f"{source}.{state}", data, key, source="poller")
        # What operators alert on (`journalctl -p warning`): every flip, recovery included.
        log.warning("health.changed", agent=agent, source=source, state=state)
    woken: list[tuple[int, int]] = []
    for source, healthy in transitions(before, world) if wake_runs else []:
        name = f"{source}.{'healthy' if healthy else 'unhealthy'}"
        data = state_data(agent, source, world[source])
        for run_id, wait in qw.waiting_runs_of_agent(c, agent):
            # A question asked during an outage is moot once the service recovers (withdrawn
            # like an approval); other questions wait for a human; event waits match events
            # themselves; a model backoff keeps its Retry-After (the next decision sees the world).
            moot = healthy and wait.get("why") == "question"
            if wait.get("why") not in ("sleep", "approval") and not moot:
                continue
            why: JSON = {"woke_by": "world", "why": wait.get("why"), "event": name, "data": data}
            if wait.get("item_id"):
                if qi.get_item(c, wait["item_id"]).status != InboxStatus.OPEN:
                    continue  # already answered: the inbox wake-up takes it from here
                reason = f"withdrawn: {source} became {'healthy' if healthy else 'unhealthy'}"
                qi.resolve(c, wait["item_id"], InboxStatus.EXPIRED, answer=reason)
                why.update(withdrew=wait["item_id"], action=wait.get("action"), reason=reason)
            epoch = qt.wake(c, run_id, owner, why, lease_s, expect=wait)  # this wait, no later one
            if epoch is not None:
                woken.append((run_id, epoch))
    return woken


def state_data(agent: str, source: str, obs: JSON) -> JSON:
    """What an event or a run started by a watched state says about it."""
    data: JSON = {"agent": agent, "source": source, "state": state_of(obs)}
    data.update({k: obs[k] for k in ("healthy", "since", "status", "error") if k in obs})
    return data


@dataclass(frozen=True)
class StateTrigger:
    """One agent's trigger on a source's state, and the agent whose looks say what it is."""

    trigger: str  # e.g. "health.unhealthy"
    source: str
    state: str
    watcher: str  # the agent itself when it watches the source, else the first that does


def state_triggers(cfg: Config) -> dict[str, list[StateTrigger]]:
    """agent → its triggers that name a watched source's state (the config validates them)."""
    plan: dict[str, list[StateTrigger]] = {}
    for name, agent in cfg.agents.items():
        for trigger in agent.triggers:
            named = cfg.state_trigger(trigger)
            watchers = cfg.watchers(named[0]) if named else []
            if named and watchers:
                watcher = name if name in watchers else watchers[0]
                plan.setdefault(name, []).append(StateTrigger(trigger, *named, watcher))
    return plan


@dataclass(frozen=True)
class Due:
    goal_id: int
    agent: str
    on: StateTrigger
    episode: str
    obs: JSON


def _episode_mark(goal_id: int, trigger: str) -> str:
    return f"episode:{goal_id}:{trigger}"


def due(c: Any, plan: Mapping[str, list[StateTrigger]], fresh: set[str]) -> list[Due]:
    """Active goals whose state trigger holds, in an episode not yet recorded for them."""
    due: list[Due] = []
    looks: dict[str, JSON] = {}
    for goal in q.list_goals(c, "active") if plan else []:
        for on in plan.get(goal.agent, ()):
            if on.watcher not in fresh:
                continue
            if on.watcher not in looks:
                last = worlds.last_snapshot(c, on.watcher)
                looks[on.watcher] = last[1] if last else {}
            obs = looks[on.watcher].get(on.source)
            if obs is None or state_of(obs) != on.state:
                continue
            episode = episode_key(on.watcher, on.source, obs)
            mark = meta.get_meta(c, _episode_mark(goal.goal_id, on.trigger))
            # A run's unconfirmed success leaves a cool-down: then the episode is due again.
            if mark != episode and not claims.cooling(mark, stamp.now(c)):
                due.append(Due(goal.goal_id, goal.agent, on, episode, obs))
    return due


def episodes(c: Any) -> None:
    """Take the episodes' singleton: daemons sharing a database read the episode marks and start
    their runs one at a time, so an episode starts one run, not one per daemon."""
    c.dialect.singleton(c, "episodes")


def start_due(
    c: Any, due: list[Due], owner: str, lease_s: float = LEASE_S
) -> list[tuple[int, int]]:
    """Record each due episode with its goal and start a run — unless the goal has a live run,
    which then sees this episode itself (and answers for it: no second run once it ends).
    `due` must have been read under `episodes(c)` in the same transaction."""
    started: list[tuple[int, int]] = []
    for d in due:
        meta.set_meta(c, _episode_mark(d.goal_id, d.on.trigger), d.episode)
        if q.active_run_of_goal(c, d.goal_id) is not None:
            continue
        data: JSON = {
            "event": d.on.trigger,
            "episode": d.episode,
            "data": state_data(d.on.watcher, d.on.source, d.obs),
        }
        run_id = q.create_run(
            c, goal_id=d.goal_id, agent=d.agent, trigger=f"state:{d.on.trigger}", data=data
        )
        started.append((run_id, leases.claim_run(c, run_id, owner, lease_s)))
    return started
