"""`agentd status`: the home at a glance — is the daemon up, runs by state, what waits for the
operator in the inbox, and when goals check in next. One short read; nothing is written."""

from __future__ import annotations

import time

import typer

from agentd.cli import doctor_reach
from agentd.cli.root import JsonFlag, app, emit, open_store, paths_of
from agentd.daemon import serve as daemon
from agentd.models import utcnow
from agentd.operator.overview import at_a_glance, gather
from agentd.text import urls_shown
from agentd.views import records


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
        data = at_a_glance(store, time.time())
    up = {"up": pid is not None, "pid": pid if pid is not None and pid > 0 else None}
    served = doctor_reach.web_served(paths, pid)  # what the daemon serves, asked over its socket
    web = None
    if isinstance(served, dict) and (served.get("web") or served.get("port_failed")):
        web = {"port": served.get("port") if served.get("web") else None,
               "port_failed": served.get("port_failed")}  # fmt: skip
    data = {"home": str(paths.home), "daemon": up, "web": web, **data}
    for health in (data.get("notify") or {}).values():  # older code kept whole URLs in errors
        if health.get("error"):
            health["error"] = urls_shown(str(health["error"]))
    emit(as_json, data, lambda: records.status_view(data, utcnow()))


__all__ = ["gather", "status"]  # gather: the overview inside a caller's own read transaction
