"""The aggregates `agentd status` reads (issue 35), each from an index whatever the number of
goals: the open inbox by kind, the goals whose next check-in may come first (candidates for the
planner, soonest first by each table's own due time) and the goals with a failed check-in."""

from __future__ import annotations

from typing import Any

from agentd.db import meta
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


DUE_TIMES = (
    "SELECT x.due_at, x.goal_id FROM checkins x CROSS JOIN goals g WHERE g.goal_id = x.goal_id"
    " AND x.status IN ('due', 'deciding', 'decided') AND g.status = 'active'"
    " ORDER BY x.due_at LIMIT ?",
    "SELECT k.next_at, k.goal_id FROM cadences k CROSS JOIN goals g WHERE g.goal_id = k.goal_id"
    " AND k.next_at IS NOT NULL AND g.status = 'active' ORDER BY k.next_at LIMIT ?",
    "SELECT s.next_fire_at, s.goal_id FROM schedules s CROSS JOIN goals g"
    " WHERE g.goal_id = s.goal_id AND s.enabled = 1 AND s.next_fire_at IS NOT NULL"
    " AND g.status = 'active' ORDER BY s.next_fire_at LIMIT ?",
)


def due_times(c: Conn, limit: int) -> tuple[list[tuple[float, int]], float | None]:
    """The recorded due times of active goals — open check-in rows, cadence looks, schedule
    fires — the `limit` soonest of each index, merged soonest first as (time, goal_id), and
    the time up to which the merge holds every such row (None: it holds them all). A goal's
    check-in runs at or after its earliest due time here (the planner only moves times later:
    quiet hours, snoozes, backoffs)."""
    out: list[tuple[float, int]] = []
    complete: float | None = None
    for sql in DUE_TIMES:
        rows = [(float(t), int(g)) for t, g in c.execute(sql, (limit,))]
        out += rows
        if len(rows) >= limit:
            complete = rows[-1][0] if complete is None else min(complete, rows[-1][0])
    out.sort()
    return out, complete


def quiet_overrides(c: Conn) -> list[tuple[str | None, str | None]]:
    """The distinct (quiet, tz) goals set over their agent's (`cadences_quiet`: only theirs)."""
    rows = c.execute(
        "SELECT DISTINCT quiet, tz FROM cadences WHERE quiet IS NOT NULL OR tz IS NOT NULL"
    )
    return [(q, z) for q, z in rows]


def own_quiet_goals(c: Conn, limit: int) -> list[int] | None:
    """The active goals that set quiet hours or a zone of their own (`cadences_quiet`), or None
    when there are more than `limit`."""
    rows = c.execute(
        "SELECT k.goal_id FROM cadences k CROSS JOIN goals g WHERE g.goal_id = k.goal_id"
        " AND (k.quiet IS NOT NULL OR k.tz IS NOT NULL) AND g.status = 'active' LIMIT ?",
        (limit + 1,),
    ).fetchall()
    return None if len(rows) > limit else [int(r[0]) for r in rows]


def planning(c: Conn) -> dict[str, int] | None:
    """How far the daemon's planning of new goals has got ({"read": n, "of": total}), or None
    when it is done (or no daemon has planned yet): the `outer_planning` meta row."""
    row = c.execute("SELECT value FROM meta WHERE key = ?", (PLANNING_KEY,)).fetchone()
    parts = str(row[0]).split() if row is not None else []
    if len(parts) != 3 or parts[2] == "1" or not all(p.isdigit() for p in parts):
        return None
    return {"read": int(parts[0]), "of": int(parts[1])}


def note_planning(c: Conn, read: int, total: int, done: bool) -> None:
    """Write a daemon's planning progress to the `outer_planning` row unless the row is ahead:
    each daemon sweeps with a cursor of its own (two on PostgreSQL), and `status` shows the
    furthest — done stays done for as many goals, a total never shrinks but by a done sweep
    (goals pruned), goals read never go back for the same total. Locked (FOR UPDATE on
    PostgreSQL) so two daemons' writes do not cross."""
    row = c.execute(
        f"SELECT value FROM meta WHERE key = ?{'' if c.dialect.sqlite else ' FOR UPDATE'}",
        (PLANNING_KEY,),
    ).fetchone()
    parts = str(row[0]).split() if row is not None else []
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        r0, t0, d0 = int(parts[0]), int(parts[1]), parts[2] == "1"
        # done: only a sweep over more goals shows again
        if not (total > t0 or (not d0 and (done or (total == t0 and read > r0)))):
            return
    meta.set_meta(c, PLANNING_KEY, f"{read} {total} {int(done)}")


def goals_with_failures(c: Conn) -> list[int]:
    """Active goals with a failed check-in (`checkins_failed`): the only ones that can have a
    failing streak."""
    rows = c.execute(
        "SELECT DISTINCT x.goal_id FROM checkins x CROSS JOIN goals g WHERE g.goal_id = x.goal_id"
        " AND x.status = 'failed' AND g.status = 'active' ORDER BY x.goal_id"
    )
    return [int(r[0]) for r in rows]
