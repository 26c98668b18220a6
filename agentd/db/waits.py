"""What waiting runs wait for: the queries the daemon's scheduler matches waits against (due
timers, answered items, new events). Who drives which run (leases) is db/leases.py.

Write functions expect to be called inside a write transaction (see agentd/db/queries.py).
"""

from __future__ import annotations

import json

from agentd.db.conn import Conn
from agentd.models import JSON

# ── what the daemon's waker matches ─────────────────────────────────────────────────────────────


def waiting_runs_of_agent(c: Conn, agent: str) -> list[tuple[int, JSON]]:
    rows = c.execute(
        "SELECT run_id, wait FROM runs WHERE status = 'waiting' AND agent = ?", (agent,)
    )
    return [(int(r), json.loads(w or "{}")) for r, w in rows]


def due_timers(c: Conn, now: float, limit: int = 500) -> list[int]:
    rows = c.execute(
        "SELECT run_id FROM runs WHERE status = 'waiting' AND next_wake_at <= ?"
        " ORDER BY next_wake_at LIMIT ?",
        (now, limit),
    )
    return [int(r[0]) for r in rows]


def next_timer(c: Conn) -> float | None:
    row = c.execute(
        "SELECT min(next_wake_at) FROM runs WHERE status = 'waiting' AND next_wake_at IS NOT NULL"
    ).fetchone()
    return None if row[0] is None else float(row[0])


def runs_with_resolved_items(c: Conn, since: float = 0.0) -> list[tuple[int, int]]:
    """(run_id, item_id) for waiting runs whose inbox item was resolved at or after `since`.

    Driven from the inbox's resolved_at index (CROSS JOIN fixes the loop order in SQLite), so
    its cost follows recent answers, not the number of waiting runs.
    """
    # The join's condition is in the WHERE: PostgreSQL refuses a CROSS JOIN with an ON.
    rows = c.execute(
        "SELECT r.run_id, i.item_id FROM inbox i CROSS JOIN runs r"
        " WHERE r.wait_item_id = i.item_id AND i.resolved_at >= ? AND r.status = 'waiting'"
        " AND r.wait_kind = 'inbox'",
        (since,),
    )
    return [(int(a), int(b)) for a, b in rows]


def runs_waiting_on_events(c: Conn) -> list[tuple[int, JSON, int, str, JSON]]:
    """(run_id, wait, event_id, name, data) for each event newer than the run's wait began."""
    rows = c.execute(
        "SELECT r.run_id, r.wait, e.event_id, e.name, e.data FROM runs r"
        " JOIN events e ON e.name = r.wait_event AND e.event_id > r.wait_after_event"
        " WHERE r.status = 'waiting' AND r.wait_kind = 'event' ORDER BY e.event_id"
    )
    return [(int(a), json.loads(b), int(e), n, json.loads(d)) for a, b, e, n, d in rows]
