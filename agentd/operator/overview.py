"""The home at a glance, as `agentd status` shows it: runs by state (and the active ones), what
waits in the inbox, the next check-ins, the home's time, each channel's health. One read."""

from __future__ import annotations

from typing import Any

from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.store import SyncStore
from agentd.models import JSON, GoalStatus, InboxKind, RunStatus, from_ts
from agentd.outer import timebase

ACTIVE_RUNS = 10  # running and waiting runs listed (all are counted)
NEXT_CHECKINS = 5  # the soonest check-ins listed


def _next_checkins(c: Any) -> list[JSON]:
    """The soonest planned looks and schedule fires of active goals (home time, unix seconds)."""
    out: list[JSON] = []
    for goal in q.list_goals(c, GoalStatus.ACTIVE):
        row = qc.cadence_row(c, goal.goal_id) or {}
        if row.get("next_at") is not None:
            out.append({"goal_id": goal.goal_id, "title": goal.title, "at": row["next_at"],
                        "why": row.get("next_why") or "cadence"})  # fmt: skip
        for s in qs.of_goal(c, goal.goal_id):
            if s.next_fire_at is not None:
                out.append({"goal_id": goal.goal_id, "title": goal.title, "at": s.next_fire_at,
                            "why": f"schedule {s.schedule_id} ({s.kind} {s.spec})"})  # fmt: skip
    return sorted(out, key=lambda x: x["at"])[:NEXT_CHECKINS]


def gather(c: Any, home_now: float) -> JSON:
    """The overview, read on connection `c` (inside the caller's transaction)."""
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
        "next_checkins": [{**x, "at": from_ts(x["at"])} for x in _next_checkins(c)],
        "now": from_ts(timebase.now(c, home_now)),
        "notify": outbox.channel_health(c),  # per channel: pending, failing (agentd/notify/)
    }


def at_a_glance(store: SyncStore, home_now: float) -> JSON:
    """The overview in one read transaction; `home_now` is the wall clock's unix time."""
    return store.read(lambda c: gather(c, home_now))
