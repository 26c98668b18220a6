"""The daemons serving the home's database, as `agentd status` and `agentd doctor` show them: each
one's state (live, silent past its lease, stopped), the runs it holds, how long ago it renewed,
the config it runs (its digest, when loaded, and whether it differs from the other live ones),
all on the database's clock (agentd/db/leases.py). Live ones first; a stopped or silent one only
while it is recent. On SQLite the home lock admits one daemon: the newest is the only one shown.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from agentd.db import leases
from agentd.db.leases import DaemonRow
from agentd.db.store import SyncStore
from agentd.errors import StateError
from agentd.models import JSON, from_ts

RECENT_S = 86400.0  # a stopped or silent daemon is shown for a day after it stopped or went quiet
LISTED = 20  # daemons listed (live ones first); `not_listed` counts the rest


class State(StrEnum):
    LIVE = "live"  # renewed within its lease: its runs are its own
    SILENT = (
        "silent"  # not renewed within its lease, never stopped: died, froze or lost the database
    )
    STOPPED = "stopped"  # stopped cleanly (its runs were handed back)


ORDER = {State.LIVE: 0, State.SILENT: 1, State.STOPPED: 2}


def state(d: DaemonRow) -> State:
    if d.stopped_at is not None:
        return State.STOPPED
    return State.LIVE if d.live else State.SILENT


def quiet_s(d: DaemonRow) -> float:
    """Database seconds since the daemon stopped, or since it last renewed when it did not."""
    if d.stopped_at is None:
        return d.silent_s
    db_now = d.renewed_at + d.silent_s
    return max(0.0, db_now - d.stopped_at)


def as_json(d: DaemonRow) -> JSON:
    return {
        "owner": d.owner, "host": d.host, "pid": d.pid, "version": d.version,
        "state": str(state(d)), "runs_held": d.runs_held, "lease_s": d.lease_s,
        "renewed_s_ago": round(d.silent_s, 1), "started_at": from_ts(d.started_at),
        "renewed_at": from_ts(d.renewed_at),
        "stopped_at": None if d.stopped_at is None else from_ts(d.stopped_at),
        "stopped_s_ago": None if d.stopped_at is None else round(quiet_s(d), 1),
        "config_sha256": d.config_sha256, "config_differs": False,
        "config_loaded_s_ago": (
            None if d.config_loaded_s_ago is None else round(d.config_loaded_s_ago, 1)
        ),
    }  # fmt: skip


def flag_disagreement(shown: list[JSON]) -> list[JSON]:
    """Mark the live daemons whose config is not the one most of them run (on a tie, not the
    newest loaded): a host tightened and reloaded while another runs the old rules."""
    live = [d for d in shown if d["state"] == State.LIVE and d["config_sha256"]]
    digests = {d["config_sha256"] for d in live}
    if len(digests) < 2:
        return shown
    newest = min(live, key=lambda d: d["config_loaded_s_ago"] or 0.0)["config_sha256"]
    common = max(digests, key=lambda sha: (sum(d["config_sha256"] == sha for d in live),
                                          sha == newest))  # fmt: skip
    for d in live:
        d["config_differs"] = d["config_sha256"] != common
    return shown


def listed(
    rows: list[DaemonRow], *, shared: bool, here: bool | None = None
) -> tuple[list[JSON], int]:
    """The daemons to show of `rows` (newest first, as leases.daemons reads them) and how many
    recent ones were left out past LISTED. Where one daemon owns the database (SQLite) it renews
    nothing: `here`, whether the home lock is held, says whether its newest start is live."""
    if not shared:
        rows = rows[:1]  # the home lock admits one daemon: older rows are its past starts
        if here is not None and rows and rows[0].stopped_at is None:
            only = rows[0]
            one = as_json(only)
            one["state"] = str(State.LIVE if here else State.SILENT)
            return [one], 0
    recent = [d for d in rows if d.live or quiet_s(d) < RECENT_S]
    recent.sort(key=lambda d: (ORDER[state(d)], -d.started_at))
    shown = flag_disagreement([as_json(d) for d in recent])
    return shown[:LISTED], max(0, len(recent) - LISTED)


def serving(store: SyncStore, here: bool | None = None) -> JSON:
    """{"daemons": [...], "not_listed": n, "shared": bool} in one read; a database too old to
    record daemons (schema before 7, read before a command that writes upgrades it) has none."""
    shared = store.backend.shared
    try:
        rows: list[DaemonRow] = store.read(leases.daemons)
    except StateError:
        if store.read(store.backend.schema_version) >= store.backend.latest:
            raise
        rows = []  # no daemons table yet: whoever serves the home predates it
    shown, more = listed(rows, shared=shared, here=here)
    return {"daemons": shown, "not_listed": more, "shared": shared}


def counts(daemons: list[Any]) -> dict[str, int]:
    """How many of the listed daemons are in each state."""
    out = {str(s): 0 for s in State}
    for d in daemons:
        out[d["state"]] += 1
    return out
