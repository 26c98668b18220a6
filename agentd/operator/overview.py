"""The home at a glance, as `agentd status` shows it: runs by state (and the active ones), what
waits in the inbox, the next check-ins, the home's time, each channel's health. One read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import JSON, GoalStatus, InboxKind, RunStatus, from_ts
from agentd.outer import timebase

if TYPE_CHECKING:
    from agentd.config import Config

ACTIVE_RUNS = 10  # running and waiting runs listed (all are counted)
NEXT_CHECKINS = 5  # the soonest check-ins listed
CONFIG_ERROR = "config.toml does not load, so they cannot be planned; `agentd doctor` says why"


def _next_checkins(c: Any, cfg: Config, now: float) -> list[JSON]:
    """The soonest next check-ins of active goals, each as `goal show` plans it (`outer.planner`:
    after jitter, quiet hours, snoozes and schedules) with its reason; unix seconds."""
    from agentd.operator import schedules

    out: list[JSON] = []
    for goal in q.list_goals(c, GoalStatus.ACTIVE):
        found = schedules.next_checkin(c, cfg, goal, now)
        if found is not None:
            out.append({"goal_id": goal.goal_id, "title": goal.title, "at": found.at,
                        "why": found.why, "by": found.by, "tz": found.tz})  # fmt: skip
    return sorted(out, key=lambda x: x["at"])[:NEXT_CHECKINS]


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
    items = qi.list_items(c, status="open")
    return {
        "runs": {str(s): counts.get(str(s), 0) for s in RunStatus},
        "active_runs": sorted(active, key=lambda r: r.run_id)[:ACTIVE_RUNS],
        "inbox": {
            "open": len(items),
            **{str(k): sum(1 for i in items if i.kind == k) for k in InboxKind},
            "oldest": min((i.created_at for i in items), default=None),
        },
        "next_checkins": [
            {**x, "at": from_ts(x["at"])}
            for x in ([] if cfg is None else _next_checkins(c, cfg, now))
        ],
        **({} if cfg is not None else {"next_checkins_error": CONFIG_ERROR}),
        "now": from_ts(now),
        "notify": outbox.channel_health(c),  # per channel: pending, failing (agentd/notify/)
    }


def at_a_glance(store: SyncStore, home_now: float, cfg: Config | None = None) -> JSON:
    """The overview in one read transaction; `home_now` is the wall clock's unix time."""
    return store.read(lambda c: gather(c, home_now, cfg))
