"""`agentd doctor` on a home whose [store] names a PostgreSQL database: the connection, server,
session settings and schema (agentd/db/postgres/checks.py through the operator layer), then the
daemons serving the database."""

from __future__ import annotations

from typing import Any

from agentd.config import Paths
from agentd.errors import AgentdError, ConfigError
from agentd.operator import daemons as operator_daemons
from agentd.operator import home as operator_home
from agentd.operator import store_health as operator_store
from agentd.views.daemons import ago
from agentd.views.records import Check


def check_shared_store(paths: Paths) -> list[Check] | None:
    """A home whose [store] names a PostgreSQL database: the connection, the server's version,
    the session settings a new connection carries, the schema (agentd/db/postgres/checks.py),
    then the daemons serving it. None for a home whose state is its SQLite file."""
    try:
        checks = operator_store.postgres_checks(paths)
    except ConfigError as e:  # url_env names nothing set: no database to look at
        return [Check("database", False, str(e))]
    if checks is None:
        return None
    if operator_store.served(checks):
        checks.append(check_daemons(paths))
    return checks


def check_daemons(paths: Paths) -> Check:
    """How many daemons serve the database (live: renewed within their lease), and any that went
    silent past its lease in the last day. None live is information: runs and check-ins wait."""
    try:
        store = operator_home.inspect_store(paths.db)
        try:
            listed = operator_daemons.serving(store)["daemons"]
        finally:
            store.close()
    except AgentdError as e:
        return Check("daemons", False, str(e))
    live = [d for d in listed if d["state"] == operator_daemons.State.LIVE]
    silent = [d for d in listed if d["state"] == operator_daemons.State.SILENT]
    said = [f"{len(live)} live" + (": " + ", ".join(map(_daemon_said, live)) if live else "")]
    if silent:
        their = "its" if len(silent) == 1 else "their"
        said.append(
            f"{len(silent)} silent past {their} lease in the last day: "
            + ", ".join(map(_daemon_said, silent))
            + " (died, froze or lost the database; the runs held go to the next daemon that"
            " claims)"
        )
    if not live:
        said.append("start one with `agentd serve`: runs and check-ins wait until one runs")
        return Check("daemons", False, "; ".join(said), required=False, warning=bool(silent))
    return Check("daemons", True, "; ".join(said))


def check_clock(paths: Paths) -> list[Check]:
    """Information when the home runs on a simulated clock: every time doctor, status and the
    inbox show is then the simulated one, and check-ins, quiet hours and timers follow it."""
    try:
        store = operator_home.inspect_store(paths.db)
        try:
            speed = operator_home.clock_speed(store)
        finally:
            store.close()
    except AgentdError:
        return []  # the database check above already says what is wrong with it
    if speed is None:
        return []
    said = (
        f"simulated, {speed:g}× the wall (`serve --clock-speed`): the times shown, check-ins, "
        "quiet hours and timers follow it; `serve` without --clock-speed returns to the wall"
    )
    return [Check("clock", True, said, required=False)]


def _daemon_said(d: dict[str, Any]) -> str:
    runs = f"{d['runs_held']} run{'' if d['runs_held'] == 1 else 's'}"
    return f"{d['host']} pid {d['pid']} ({d['version']}, {runs}, renewed {ago(d['renewed_s_ago'])})"
