"""The aggregates `agentd status` reads (issue 35), each from an index whatever the number of
goals: the open inbox by kind, the goals whose next check-in may come first (candidates for the
planner, soonest first by each table's own due time) and the goals with a failed check-in."""

from __future__ import annotations

from typing import Any

from agentd.db.conn import Conn

PLANNING_KEY = "outer_planning"  # meta: "<goals read> <of goals> <1: done>", the outer loop's


def open_inbox(c: Conn) -> dict[str, Any]:
    """{"open": n, <kind>: n …, "oldest": created_at or None} of the open inbox items."""
    out: dict[str, Any] = {"open": 0, "oldest": None}
    for kind, n, oldest in c.execute(
        "SELECT kind, count(*), min(created_at) FROM inbox WHERE status = 'open' GROUP BY kind"
    ):
        out[str(kind)] = int(n)
        out["open"] += int(n)
        if oldest is not None and (out["oldest"] is None or oldest < out["oldest"]):
            out["oldest"] = oldest
    return out


def soonest_goals(c: Conn, limit: int) -> list[int]:
    """Active goals whose next check-in may be among the first: those with an open check-in
    row, the `limit` soonest cadence looks and the `limit` soonest schedule fires (each read
    from its index; the planner then places each one exactly)."""
    found: dict[int, None] = {}
    queries = (
        "SELECT x.goal_id FROM checkins x CROSS JOIN goals g WHERE g.goal_id = x.goal_id"
        " AND x.status IN ('due', 'deciding', 'decided') AND g.status = 'active'"
        " ORDER BY x.due_at LIMIT ?",
        "SELECT k.goal_id FROM cadences k CROSS JOIN goals g WHERE g.goal_id = k.goal_id"
        " AND k.next_at IS NOT NULL AND g.status = 'active' ORDER BY k.next_at LIMIT ?",
        "SELECT s.goal_id FROM schedules s CROSS JOIN goals g WHERE g.goal_id = s.goal_id"
        " AND s.enabled = 1 AND s.next_fire_at IS NOT NULL AND g.status = 'active'"
        " ORDER BY s.next_fire_at LIMIT ?",
    )
    for sql in queries:
        found.update((int(r[0]), None) for r in c.execute(sql, (limit,)))
    return list(found)


def planning(c: Conn) -> dict[str, int] | None:
    """How far the daemon's planning of new goals has got ({"read": n, "of": total}), or None
    when it is done (or no daemon has planned yet): the `outer_planning` meta row."""
    row = c.execute("SELECT value FROM meta WHERE key = ?", (PLANNING_KEY,)).fetchone()
    parts = str(row[0]).split() if row is not None else []
    if len(parts) != 3 or parts[2] == "1" or not all(p.isdigit() for p in parts):
        return None
    return {"read": int(parts[0]), "of": int(parts[1])}


def goals_with_failures(c: Conn) -> list[int]:
    """Active goals with a failed check-in (`checkins_failed`): the only ones that can have a
    failing streak."""
    rows = c.execute(
        "SELECT DISTINCT x.goal_id FROM checkins x CROSS JOIN goals g WHERE g.goal_id = x.goal_id"
        " AND x.status = 'failed' AND g.status = 'active' ORDER BY x.goal_id"
    )
    return [int(r[0]) for r in rows]
