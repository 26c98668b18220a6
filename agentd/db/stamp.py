"""The time a row is stamped with: the home's now, read inside the transaction that writes the row.

A home runs on the wall, or on the simulated clock of `agentd serve --clock-speed N` that the daemon
records in `meta` (agentd/outer/timebase.py). Every query that writes a time calls `now(c)`, so the
daemon, the CLI, the MCP server and the web inbox stamp rows on one clock with none handed around;
the run loop stamps its journal with its own clock's reading, which the daemon builds from the same
record. Only run leases stay on the wall: they say how long a live process holds a run, so the
database's clock stamps them (`c.dialect.now_sql`: one clock for every daemon sharing a database);
`wall()` is this process's wall, for what else counts real seconds.
"""

from __future__ import annotations

import json
from typing import Any

from agentd.clock import SYSTEM
from agentd.db.conn import Conn

KEY = "clock"  # meta: {"speed", "wall0", "sim0"}, or "" / absent for the wall


def recorded(c: Conn) -> tuple[float, float, float] | None:
    """The home's scaled clock as recorded — (speed, wall0, sim0) — or None on the wall.

    Read once per transaction where the connection keeps a memo for it (PostgreSQL's: every
    read is a round trip to the server, and a step's transaction stamps several rows)."""
    memo: dict[str, Any] | None = getattr(c, "memo", None)
    if memo is None:
        return _read(c)
    if KEY not in memo:
        memo[KEY] = _read(c)
    found: tuple[float, float, float] | None = memo[KEY]
    return found


def _read(c: Conn) -> tuple[float, float, float] | None:
    row = c.execute("SELECT value FROM meta WHERE key = ?", (KEY,)).fetchone()
    text = "" if row is None else str(row[0])
    if not text:
        return None
    try:
        value = json.loads(text)
        return float(value["speed"]), float(value["wall0"]), float(value["sim0"])
    except (ValueError, KeyError, TypeError):
        return None  # unreadable: the wall, as if none was recorded


def at(c: Conn, wall_now: float) -> float:
    """The home's time at the wall instant `wall_now`: simulated if a scaled clock is recorded."""
    rec = recorded(c)
    if rec is None:
        return wall_now
    speed, wall0, sim0 = rec
    return sim0 + (wall_now - wall0) * speed


def now(c: Conn) -> float:
    """The home's now: what every row written in this transaction is stamped with."""
    return at(c, SYSTEM.now())


def wall() -> float:
    """The wall's now, for what measures real seconds whatever the home's clock (run leases)."""
    return SYSTEM.now()
