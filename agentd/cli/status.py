"""`agentd status`: the home at a glance — is the daemon up (and answering: one bounded ask on
its socket tells a running daemon from a stopped one that still holds the home), runs by state,
what waits for the operator in the inbox, when goals check in next, and the daemons serving the
database (on PostgreSQL several, from any host; on SQLite the one). Short reads; nothing is
written."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from agentd.cli.root import JsonFlag, app, config_of, daemon_pid, emit, open_store, paths_of
from agentd.config import Config
from agentd.errors import ConfigError, StateError
from agentd.operator import daemons, liveness
from agentd.operator.overview import at_a_glance, gather
from agentd.text import safe, urls_shown
from agentd.views import records
from agentd.views.daemons import daemons_table

WatchFlag = Annotated[
    bool, typer.Option("--watch", help="Show it again every 2 seconds until Ctrl-C.")
]


@app.command("status")
def status(ctx: typer.Context, as_json: JsonFlag = False, watch: WatchFlag = False) -> None:
    """Is the daemon up (and responding); runs by state (and the active ones); open inbox items;
    the next check-ins; the daemons serving the database (live ones, and those stopped or silent
    in the last day). Exits 0 whether or not a daemon runs.

    \b
    Example: agentd status --json
    Kept on screen: agentd status --watch
    """
    if watch:
        from agentd.cli.repeat import repeat

        repeat(lambda: _status(ctx, as_json))
    else:
        _status(ctx, as_json)


def _status(ctx: typer.Context, as_json: bool) -> None:
    paths = paths_of(ctx)
    pid = daemon_pid(paths)
    try:  # the next check-ins are planned from the agents' cadences
        cfg: Config | None = config_of(ctx)
    except ConfigError:
        cfg = None  # status still shows the home; it says the check-ins cannot be planned
    try:
        with open_store(ctx) as store:
            data = at_a_glance(store, time.time(), cfg)
            serving = daemons.serving(store, here=pid is not None)
            database = store.backend.label if serving["shared"] else None  # never its password
    except StateError as e:  # the database is down: what this home's daemon makes of it
        raise StateError(_unreachable(str(e), liveness.probe(paths, pid))) from None
    alive = liveness.probe(paths, pid)  # also what the daemon serves, as it answered
    served = alive.served
    web = None
    if isinstance(served, dict) and (served.get("web") or served.get("port_failed")):
        web = {"port": served.get("port") if served.get("web") else None,
               "port_failed": served.get("port_failed")}  # fmt: skip
    data = {"home": str(paths.home), "daemon": alive.as_json(), "web": web, **data,
            "database": database, "daemons": serving["daemons"],
            "daemons_not_listed": serving["not_listed"]}  # fmt: skip
    for health in (data.get("notify") or {}).values():  # older code kept whole URLs in errors
        if health.get("error"):
            health["error"] = urls_shown(str(health["error"]))
    emit(as_json, data, lambda: _text(data, alive))


def _unreachable(error: str, alive: liveness.Daemon) -> str:
    """The store's error, and whether this home's daemon is up and riding the outage out."""
    outage = (alive.served or {}).get("database_outage")
    if outage:
        return f"{error}; the daemon here (pid {alive.pid}) is up and waiting: {outage}"
    if alive.pid is not None and not alive.silent:
        return f"{error}; the daemon here (pid {alive.pid}) is up"
    return error


def _text(data: dict[str, Any], alive: liveness.Daemon) -> str:
    """The status view, with the daemons serving the database after its head. The `daemon:` line
    is this home's own daemon: for one that holds the home without answering it says so (the
    view knows only up and down), and on a shared database it says whether others serve it."""
    text = records.status_view(data, data["now"])  # the home's now, as its rows were stamped
    if speed := data.get("clock_speed"):  # its times are not the wall's: said before them all
        head, _, rest = text.partition("\n")
        text = f"{head}\nclock:  simulated, {speed:g}× the wall (`serve --clock-speed`)\n{rest}"
    live = sum(1 for d in data["daemons"] if d["state"] == daemons.State.LIVE)
    if alive.silent:
        text = _daemon_line(text, safe(f"not responding: {alive.why_silent()}"))
    elif alive.pid is None and data["database"] is not None:
        text = _daemon_line(
            text,
            f"not running here; {live} daemon{' serves' if live == 1 else 's serve'} the database"
            if live
            else "not running here, nor anywhere on this database; start one with `agentd serve`"
            " (runs and check-ins wait until one runs)",
        )
    if (planning := data.get("planning")) is not None:
        text += (
            f"\nplanning: {planning['read']:,} of {planning['of']:,} goals read so far (the "
            "daemon plans new goals in batches; their check-ins are not missed meanwhile)"
        )
    section = _daemons_text(data)
    if section is None:
        return text
    head, _, rest = text.partition("\n\n")
    return "\n\n".join(p for p in (head, section, rest) if p)


def _daemons_text(data: dict[str, Any]) -> str | None:
    """The daemons section, on PostgreSQL only (naming the database). A SQLite home has one
    daemon, which the `daemon:` line already says; its table (renewals that only count up, runs
    held) was noise there — `--json` still lists it."""
    listed = data["daemons"]
    if data["database"] is None:
        return None
    title = f"daemons serving {safe(data['database'])}:"
    if not listed:
        return f"{title}\nnone in the last day; start one with `agentd serve`"
    return f"{title}\n{daemons_table(listed, data['daemons_not_listed'])}"


def _daemon_line(text: str, value: str) -> str:
    """`text` with its `daemon:` field saying `value`."""
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if line.startswith("daemon:"):
            rest = line[len("daemon:") :]
            label = line[: len(line) - len(rest.lstrip())]  # "daemon:" and its padding
            lines[n] = label + value
            break
    return "\n".join(lines)


__all__ = ["gather", "status"]  # gather: the overview inside a caller's own read transaction
