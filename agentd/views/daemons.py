"""The daemons serving a database, as `agentd status` lists them (agentd.operator.daemons): one
line each — owner, host, pid, version, runs held, last renewal, config and state — times counted
on the database's clock, never against the home's now; a line names live daemons that run
another config than the others."""

from __future__ import annotations

from collections.abc import Sequence

from agentd.models import JSON
from agentd.text import safe
from agentd.views.tables import table
from agentd.views.times import span


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "now" if seconds < 1 else f"{span(seconds)} ago"


def state_text(d: JSON) -> str:
    """`live`, `silent past its 30s lease` — it died, froze or lost the database, and another
    daemon takes its runs over — or `stopped 5m ago`."""
    if d["state"] == "stopped":
        return f"stopped {ago(d['stopped_s_ago'])}"
    if d["state"] == "silent":
        return f"silent past its {span(d['lease_s'])} lease"
    return "live"


def config_text(d: JSON) -> str:
    """`3f2a9c1d0b7e · 2h ago`, with `DIFFERS` when the other live daemons run another."""
    sha = d.get("config_sha256")
    if not sha:
        return "-"
    text = f"{safe(sha[:12])} · {ago(d.get('config_loaded_s_ago'))}"
    return f"{text} DIFFERS" if d.get("config_differs") else text


def daemons_table(daemons: Sequence[JSON], not_listed: int = 0) -> str:
    rows = [
        (safe(d["owner"]), safe(d["host"]), d["pid"], safe(d["version"]), d["runs_held"],
         ago(d["renewed_s_ago"]), config_text(d), state_text(d))
        for d in daemons
    ]  # fmt: skip
    headers = ("owner", "host", "pid", "version", "runs", "renewed", "config", "state")
    # The owner names its host and pid: at narrow widths those columns go first.
    text = table(headers, rows, {"owner": 40, "host": 24}, floors={"owner": 20},
                 drop=("host", "pid", "config"))  # fmt: skip
    if not_listed:
        text += f"\n… and {not_listed} more"
    differ = [d for d in daemons if d.get("config_differs")]
    if differ:
        hosts = ", ".join(sorted({safe(d["host"]) for d in differ}))
        text += (f"\nlive daemons run different configs ({hosts}: DIFFERS): reload or restart "
                 "them with the same config.toml, or they apply different rules")  # fmt: skip
    return text


def daemons_line(daemons: Sequence[JSON]) -> str:
    """`2 live · 1 silent · 0 stopped (in the last day)`."""
    count = {s: sum(1 for d in daemons if d["state"] == s) for s in ("live", "silent", "stopped")}
    return " · ".join(f"{n} {s}" for s, n in count.items())
