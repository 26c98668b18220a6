"""What the outer loop's tick reads (issue 35): only rows that are due or changed, each through an
index — schedules whose next fire has come (`schedules_due`), cadence looks whose time has come
(`cadences_due`), goals not yet planned (new ones past a cursor on `goal_id`, reset ones through
`cadences_due`) — each batch bounded by a limit, so a tick costs what is due, not what
exists. The goals' agents come with the rows (a join on the goal's primary key).

`CROSS JOIN` keeps SQLite's loop on the indexed side first (PostgreSQL plans it as it likes).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentd.db import checkins as qc
from agentd.db.conn import Conn
from agentd.db.schedules import COLS, Schedule, _from_row

_S_COLS = ", ".join("s." + k.strip() for k in COLS.split(","))


def schedules(
    c: Conn, now: float, agents: Sequence[str], skip: Sequence[int], limit: int
) -> list[tuple[Schedule, str]]:
    """(schedule, agent) of enabled schedules of active goals of `agents` whose next fire is at
    or before `now`, soonest first, at most `limit`; `skip` are schedules whose row no longer
    parses. A paused or closed goal's schedules are parked out of this range (`next_fire_at`
    NULL: db/queries.py `park`), so the search never reads past them."""
    d = c.dialect
    rows = c.execute(
        f"SELECT {_S_COLS}, g.agent FROM schedules s CROSS JOIN goals g"
        " WHERE g.goal_id = s.goal_id AND s.enabled = 1 AND s.next_fire_at <= ?"
        f" AND g.status = 'active' AND {d.in_list('g.agent')}"
        f" AND NOT ({d.in_list('s.schedule_id')}) ORDER BY s.next_fire_at, s.schedule_id LIMIT ?",
        (now, d.list_param(agents), d.list_param(skip), limit),
    )
    return [(_from_row(r[:-1]), str(r[-1])) for r in rows]


def looks(c: Conn, now: float, agents: Sequence[str], limit: int) -> list[tuple[int, float, str]]:
    """(goal_id, next_at, agent) of active goals of `agents` whose cadence look is due and not
    yet recorded (a recorded look stays due until its check-in ends and plans the next one),
    soonest first, at most `limit`."""
    d = c.dialect
    rows = c.execute(
        "SELECT k.goal_id, k.next_at, g.agent FROM cadences k CROSS JOIN goals g"
        " WHERE g.goal_id = k.goal_id AND k.next_at <= ? AND g.status = 'active'"
        f" AND {d.in_list('g.agent')} AND NOT EXISTS (SELECT 1 FROM checkins x"
        "  WHERE x.goal_id = k.goal_id AND coalesce(x.schedule_id, 0) = 0 AND x.due_at = k.next_at)"
        " ORDER BY k.next_at LIMIT ?",
        (now, d.list_param(agents), limit),
    )
    return [(int(g), float(t), str(a)) for g, t, a in rows]


OFF_WHY = "check-ins are off for its agent"  # a parked look's reason (`park_off`)


def unplanned(
    c: Conn, after: int, agents: Sequence[str], limit: int
) -> tuple[list[tuple[int, str]], int, int, list[int]]:
    """Active goals of `agents` with no next look yet, among the `limit` goals after goal
    `after` (the planning cursor: each goal is read once as it appears) and those whose cadence
    row has no look and no reason (a goal committed late or resumed; `cadences_unplanned`).
    Returns ((goal_id, agent) …, the cursor's next value, how many goal rows were read past the
    cursor, the active goals found so whose agent is not one of `agents`: check-ins off, to be
    parked with a reason by `park_off`, so no later search reads past them)."""
    d = c.dialect
    rows = c.execute(
        "SELECT g.goal_id, g.agent, g.status, k.next_at IS NULL AS unplanned,"
        " k.next_why IS NULL AS unsaid FROM goals g"
        " LEFT JOIN cadences k ON k.goal_id = g.goal_id WHERE g.goal_id > ?"
        " ORDER BY g.goal_id LIMIT ?",
        (after, limit),
    ).fetchall()
    wanted = set(agents)
    found = {
        int(g): str(a) for g, a, s, u, _ in rows if u and s == "active" and a in wanted
    }  # fmt: skip
    # An off agent's goal is parked unless it is already: empty rows, and looks planned before
    # its check-ins were turned off (their time passes, and the due-look index would hold them).
    off = {int(g) for g, a, s, u, n in rows if (n or not u) and s == "active" and a not in wanted}
    # SQLite's planner would take `cadences_due` (next_at IS NULL), whose NULLs include every
    # parked (paused or closed) goal's row: the partial index holds only the unplanned ones.
    k = "cadences k INDEXED BY cadences_unplanned" if d.sqlite else "cadences k"
    # Every agent's: a goal of one whose check-ins are off is returned to be parked, not read
    # past on every tick.
    reset = c.execute(
        f"SELECT g.goal_id, g.agent FROM {k} CROSS JOIN goals g"
        " WHERE g.goal_id = k.goal_id AND k.next_at IS NULL AND k.next_why IS NULL"
        " AND g.status = 'active' AND k.goal_id <= ? ORDER BY k.goal_id LIMIT ?",
        (after, limit),
    )
    for g, a in reset:
        if a in wanted:
            found[int(g)] = str(a)
        else:
            off.add(int(g))
    cursor = int(rows[-1][0]) if rows else after
    return sorted(found.items()), cursor, len(rows), sorted(off)


def park_off(c: Conn, goal_ids: Sequence[int], now: float) -> None:
    """Goals whose agent's check-ins are off get no look and a reason (OFF_WHY): out of
    `cadences_unplanned` and of the due-look index (a look planned before they were turned off
    is dropped); their schedules' next fires leave the due-schedule search's range
    (`next_fire_at` NULL, as a paused goal's: db/queries.py `park`). A reload that turns them on
    sweeps every goal again and plans them; planning unparks their schedules (`qs.unpark`:
    catch-up by each one's misfire policy, from its last fire)."""
    for goal_id in goal_ids:
        c.execute(
            "UPDATE schedules SET next_fire_at = NULL WHERE goal_id = ? AND enabled = 1",
            (goal_id,),
        )
        c.execute(
            "INSERT INTO cadences (goal_id, updated_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (goal_id, now),
        )
        c.execute(
            "UPDATE cadences SET next_at = NULL, next_why = ?, updated_at = ? WHERE goal_id = ?"
            " AND (next_at IS NOT NULL OR next_why IS NULL)",
            (OFF_WHY, now, goal_id),
        )


def active_goals_of(c: Conn, agents: Sequence[str]) -> list[tuple[int, str]]:
    """(goal_id, agent) of the active goals of `agents`, by id, through `goals_by_agent`: an
    event starts runs for the goals of the agents it triggers, not by reading every goal."""
    d = c.dialect  # SQLite's planner would rather read every active goal (`goals_by_status`)
    names = (
        "json_each(?) AS j CROSS JOIN goals g"
        if d.sqlite
        else "unnest(?::text[]) AS j(value), goals g"
    )
    rows = c.execute(
        f"SELECT g.goal_id, g.agent FROM {names} WHERE g.agent = j.value"
        " AND g.status = 'active' ORDER BY g.goal_id",
        (d.list_param(agents),),
    )
    return [(int(g), str(a)) for g, a in rows]


def goals_total(c: Conn) -> int:
    """How many goals there are (the planning progress's denominator; one index count)."""
    return int(c.execute("SELECT count(*) FROM goals").fetchone()[0])


def next_wake(c: Conn, agents: Sequence[str], skip_schedules: Sequence[int] = ()) -> float | None:
    """The earliest time anything of the outer loop is due for goals of `agents`: a look not yet
    recorded, a schedule's fire, or a check-in waiting out a model backoff — each the first row
    of its index that qualifies."""
    d = c.dialect
    row = c.execute(
        "SELECT min(t) FROM ("
        " SELECT t FROM (SELECT k.next_at AS t FROM cadences k CROSS JOIN goals g"
        "  WHERE g.goal_id = k.goal_id AND k.next_at IS NOT NULL AND g.status = 'active'"
        f"  AND {d.in_list('g.agent')} AND NOT EXISTS (SELECT 1 FROM checkins x"
        "   WHERE x.goal_id = k.goal_id AND coalesce(x.schedule_id, 0) = 0 AND x.due_at = k.next_at)"
        "  ORDER BY k.next_at LIMIT 1) AS a"
        " UNION ALL SELECT t FROM (SELECT s.next_fire_at AS t FROM schedules s CROSS JOIN goals g"
        "  WHERE g.goal_id = s.goal_id AND s.enabled = 1 AND s.next_fire_at IS NOT NULL"
        f"  AND g.status = 'active' AND {d.in_list('g.agent')}"
        f"  AND NOT ({d.in_list('s.schedule_id')}) ORDER BY s.next_fire_at LIMIT 1) AS b"
        ") AS due",
        (d.list_param(agents), d.list_param(agents), d.list_param(skip_schedules)),
    ).fetchone()
    retry = qc.next_retry(c)
    times = [t for t in (row[0], retry) if t is not None]
    return float(min(times)) if times else None
