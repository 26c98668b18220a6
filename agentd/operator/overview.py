"""The home at a glance, as `agentd status` shows it: runs by state (and the active ones), what
waits in the inbox, the next check-ins, goals whose check-ins fail, the home's time, each
channel's health. One read."""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentd.db import glance, outbox, stamp
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import JSON, Goal, InboxKind, RunStatus, from_ts
from agentd.operator import nudges
from agentd.outer import timebase

if TYPE_CHECKING:
    from agentd.config import Config

ACTIVE_RUNS = 10  # running and waiting runs listed (all are counted)
NEXT_CHECKINS = 5  # the soonest check-ins listed
CANDIDATES = 50  # due times first read from each index as candidates for the soonest check-ins
MAX_CANDIDATES = 3200  # … read again 4× as many while quiet hours may hide a sooner one, at most
OWN_QUIET = 200  # goals with quiet hours of their own planned up front, when no more have them
FAILING_LISTED = 10  # goals with failing check-ins listed (all are counted)
CONFIG_ERROR = "config.toml does not load, so they cannot be planned; `agentd doctor` says why"


def _quiet_end(c: Any, cfg: Config, now: float, own: bool) -> Callable[[float], float]:
    """The earliest a check-in recorded as due at `t` can run: the end of quiet hours, in the
    mildest of every agent's quiet hours — and of every goal's own with `own` (`t` itself if
    any has none)."""
    from agentd.outer import cadence

    profiles = []
    found = glance.quiet_overrides(c) if own else []
    overrides = [None, *({"quiet": q, "tz": z} for q, z in found)]
    for agent in cfg.agents.values():
        for row in overrides:
            with contextlib.suppress(ValueError):  # a row that no longer parses plans nothing
                profiles.append(cadence.cadence_from(agent.checkin, row))
    return lambda t: min((cadence.leave_quiet(p, max(now, t)) for p in profiles),
                         default=max(now, t))  # fmt: skip


def _soonest(c: Any, cfg: Config, now: float) -> list[tuple[Goal, Any]]:
    """The NEXT_CHECKINS goals whose check-ins come first, each with its planned next check-in
    (`outer.planner`). Goals are read in the order of their recorded due times (db/glance.py)
    and planned, until the next due time cannot run before the ones found — quiet hours only
    move a check-in later, so one shifted to their end can let a goal further down the indexes
    come first: it is read (at most MAX_CANDIDATES due times of each index). Goals with quiet
    hours of their own (a few: OWN_QUIET at most) are planned first, so the bound needs only the
    agents' quiet hours."""
    from agentd.operator import schedules

    planned: dict[int, tuple[Goal, Any]] = {}
    ats: list[float] = []  # the planned times, sorted

    def place(goal_id: int) -> None:
        goal = q.get_goal(c, goal_id)
        found = schedules.next_checkin(c, cfg, goal, now)
        planned[goal_id] = (goal, found)
        if found is not None:
            bisect.insort(ats, found.at)

    own = glance.own_quiet_goals(c, OWN_QUIET)
    for goal_id in own or []:
        place(goal_id)
    earliest = _quiet_end(c, cfg, now, own is None)
    limit = CANDIDATES
    while True:
        rows, complete = glance.due_times(c, limit)
        for t, goal_id in rows:
            if complete is not None and t > complete:
                break  # past what this read holds of every index: read more
            if len(ats) >= NEXT_CHECKINS and earliest(t) >= ats[NEXT_CHECKINS - 1]:
                return sorted([p for p in planned.values() if p[1] is not None],
                              key=lambda p: p[1].at)[:NEXT_CHECKINS]  # fmt: skip
            if goal_id not in planned:
                place(goal_id)
        if complete is None or limit >= MAX_CANDIDATES:
            return sorted([p for p in planned.values() if p[1] is not None],
                          key=lambda p: p[1].at)[:NEXT_CHECKINS]  # fmt: skip
        limit *= 4


def _checkins(c: Any, cfg: Config | None, now: float) -> tuple[list[JSON], list[JSON]]:
    """Of the active goals: the soonest next check-ins, each as `goal show` plans it
    (`outer.planner`: after jitter, quiet hours, snoozes and schedules) with its reason — none
    without a config —, and the goals whose check-ins are failing, most failures first. Never
    every goal is planned: only those whose due times come first (`_soonest`)."""
    from agentd.operator import failures

    looks: list[JSON] = []
    failing: list[JSON] = []
    for goal, found in [] if cfg is None else _soonest(c, cfg, now):
        if found is not None:
            looks.append({"goal_id": goal.goal_id, "title": goal.title, "at": from_ts(found.at),
                          "why": found.why, "by": found.by, "tz": found.tz})  # fmt: skip
    for goal_id in glance.goals_with_failures(c):
        goal = q.get_goal(c, goal_id)
        if (streak := failures.of_goal(c, goal)) is not None:
            failing.append({**streak, "title": goal.title, "since": from_ts(streak["since"]),
                            "last_at": from_ts(streak["last_at"])})  # fmt: skip
    looks.sort(key=lambda x: x["at"])
    failing.sort(key=lambda x: (-x["in_a_row"], x["goal_id"]))
    return looks[:NEXT_CHECKINS], failing


def gather(c: Any, home_now: float, cfg: Config | None = None) -> JSON:
    """The overview, read on connection `c` (inside the caller's transaction). The next
    check-ins need the config (agents' cadences); without it (None: config.toml does not load)
    none are listed and `next_checkins_error` says why."""
    now = timebase.now(c, home_now)
    counts = q.count_runs(c)
    active = [
        r
        for status in (RunStatus.RUNNING, RunStatus.WAITING)
        for r in q.list_runs(c, status=status, limit=ACTIVE_RUNS)
    ]
    inbox = glance.open_inbox(c)
    looks, failing = _checkins(c, cfg, now)
    return {
        "runs": {str(s): counts.get(str(s), 0) for s in RunStatus},
        "active_runs": sorted(active, key=lambda r: r.run_id)[:ACTIVE_RUNS],
        "inbox": {
            "open": inbox["open"],
            **{str(k): inbox.get(str(k), 0) for k in InboxKind},
            "oldest": from_ts(inbox["oldest"]),
        },
        "next_checkins": looks,
        **({} if cfg is not None else {"next_checkins_error": CONFIG_ERROR}),
        "failing_checkins": failing[:FAILING_LISTED],  # goals whose last check-ins failed
        "failing_goals": len(failing),
        "dismissed_nudges": nudges.mostly_dismissed(c),  # goals whose nudges are mostly dismissed
        "now": from_ts(now),
        "planning": glance.planning(c),  # None, or how far a daemon's first planning has got
        # The home's clock runs N× the wall (`serve --clock-speed N`): None on the wall.
        "clock_speed": (stamp.recorded(c) or (None,))[0],
        "notify": outbox.channel_health(c),  # per channel: pending, failing (agentd/notify/)
    }


def at_a_glance(store: SyncStore, home_now: float, cfg: Config | None = None) -> JSON:
    """The overview in one read transaction; `home_now` is the wall clock's unix time."""
    return store.read(lambda c: gather(c, home_now, cfg))
