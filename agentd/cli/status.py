"""`agentd status`: the home at a glance — is the daemon up, runs by state, what waits for the
operator in the inbox, and when goals check in next. One short read; nothing is written."""

from __future__ import annotations

import time
from typing import Any

import typer

from agentd.cli import doctor_reach
from agentd.cli.root import JsonFlag, app, emit, open_store, paths_of
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.models import JSON, GoalStatus, InboxKind, RunStatus, from_ts, utcnow
from agentd.outer import timebase
from agentd.views import records

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


@app.command("status")
def status(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Is the daemon up; runs by state (and the active ones); open inbox items; the next
    check-ins. Exits 0 whether or not the daemon runs.

    \b
    Example: agentd status --json
    """
    paths = paths_of(ctx)
    pid = daemon.daemon_pid(paths)
    with open_store(ctx) as store:
        data = store.read(lambda c: gather(c, time.time()))
    up = {"up": pid is not None, "pid": pid if pid is not None and pid > 0 else None}
    served = doctor_reach.web_served(paths, pid)  # what the daemon serves, asked over its socket
    web = None
    if isinstance(served, dict) and (served.get("web") or served.get("port_failed")):
        web = {"port": served.get("port") if served.get("web") else None,
               "port_failed": served.get("port_failed")}  # fmt: skip
    data = {"home": str(paths.home), "daemon": up, "web": web, **data}
    emit(as_json, data, lambda: records.status_view(data, utcnow()))
