"""`agentd status`: the home at a glance — is the daemon up (and answering: one bounded ask on
its socket tells a running daemon from a stopped one that still holds the home), runs by state,
what waits for the operator in the inbox, and when goals check in next. One short read; nothing
is written."""

from __future__ import annotations

import time
from typing import Any

import typer

from agentd.cli.root import JsonFlag, app, config_of, daemon_pid, emit, open_store, paths_of
from agentd.config import Config
from agentd.errors import ConfigError
from agentd.operator import liveness
from agentd.operator.overview import at_a_glance, gather
from agentd.text import safe, urls_shown
from agentd.views import records


@app.command("status")
def status(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Is the daemon up (and responding); runs by state (and the active ones); open inbox items;
    the next check-ins. Exits 0 whether or not the daemon runs.

    \b
    Example: agentd status --json
    """
    paths = paths_of(ctx)
    pid = daemon_pid(paths)
    try:  # the next check-ins are planned from the agents' cadences
        cfg: Config | None = config_of(ctx)
    except ConfigError:
        cfg = None  # status still shows the home; it says the check-ins cannot be planned
    with open_store(ctx) as store:
        data = at_a_glance(store, time.time(), cfg)
    alive = liveness.probe(paths, pid)  # also what the daemon serves, as it answered
    served = alive.served
    web = None
    if isinstance(served, dict) and (served.get("web") or served.get("port_failed")):
        web = {"port": served.get("port") if served.get("web") else None,
               "port_failed": served.get("port_failed")}  # fmt: skip
    data = {"home": str(paths.home), "daemon": alive.as_json(), "web": web, **data}
    for health in (data.get("notify") or {}).values():  # older code kept whole URLs in errors
        if health.get("error"):
            health["error"] = urls_shown(str(health["error"]))
    emit(as_json, data, lambda: _text(data, alive))


def _text(data: dict[str, Any], alive: liveness.Daemon) -> str:
    """The status view; for a daemon that holds the home without answering, its `daemon:` line
    says so (the view knows only up and down)."""
    text = records.status_view(data, data["now"])  # the home's now, as its rows were stamped
    if not alive.silent:
        return text
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if line.startswith("daemon:"):
            value = line[len("daemon:") :]
            label = line[: len(line) - len(value.lstrip())]  # "daemon:" and its padding
            lines[n] = label + safe(f"not responding: {alive.why_silent()}")
            break
    return "\n".join(lines)


__all__ = ["gather", "status"]  # gather: the overview inside a caller's own read transaction
