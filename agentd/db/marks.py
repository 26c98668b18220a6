"""What moved for a goal since its previous check-in, read inside the transaction that journals the
precheck. "Since" is measured in row ids, not clock times: each check-in journals marks (the newest
snapshot, event, inbox item and run it saw, and which items and runs were still open), and the next
one counts what lies beyond them: exact whatever clock wrote the rows (the simulated one included).
"""

from __future__ import annotations

import json
from typing import Any

from agentd.db.conn import Conn
from agentd.models import JSON

MAX_LISTED = 20  # runs / answers / samples one precheck hands on (the prompt shows these)


def marks_now(c: Conn, goal_id: int, agent: str, carried: list[int]) -> JSON:
    """The marks a check-in journals: the newest ids it saw, what of the goal was still open."""

    def top(sql: str, *params: Any) -> int:
        return int(c.execute(sql, params).fetchone()[0] or 0)

    return {
        "snapshot": top("SELECT max(snapshot_id) FROM world WHERE agent = ?", agent),
        "event": top("SELECT max(event_id) FROM events"),
        "item": top("SELECT max(item_id) FROM inbox"),
        "run": top("SELECT max(run_id) FROM runs"),
        "open_items": [r[0] for r in c.execute(
            "SELECT item_id FROM inbox WHERE goal_id = ? AND status = 'open'", (goal_id,))],
        "active_runs": [r[0] for r in c.execute(
            "SELECT run_id FROM runs WHERE goal_id = ? AND status IN ('running', 'waiting')",
            (goal_id,))],
        "overdue": carried,
    }  # fmt: skip


def snapshot_mark(c: Conn, agent: str, marks: JSON | None, created_at: float) -> int:
    """The world mark a check-in counts changes beyond: its previous check-in's, or (the first
    check-in) the agent's last snapshot from before the goal was created."""
    if marks is not None:
        return int(marks.get("snapshot", 0))
    row = c.execute(
        "SELECT max(snapshot_id) FROM world WHERE agent = ? AND taken_at < ?", (agent, created_at)
    ).fetchone()
    return int(row[0] or 0)


MAX_WORLD_SAMPLES = 20


def gather(
    c: Conn,
    goal_id: int,
    agent: str,
    triggers: list[str],
    marks: JSON | None,
    created_at: float,
    now: float,
    overdue_after_s: float,
) -> JSON:
    """What moved for the goal beyond `marks` (None: since the goal was created). Answers are
    the operator's responses to the goal's own items (nudges, clarifying and confirm questions);
    what a run asked is the run's business — its end is what a check-in notices."""
    d = c.dialect
    m = marks or {}
    seen_items = m.get("open_items", [])
    active = m.get("active_runs", [])
    runs = c.execute(
        "SELECT run_id, status, summary FROM runs WHERE goal_id = ?"
        " AND status IN ('succeeded', 'failed', 'cancelled')"
        f" AND (run_id > ? OR {d.in_list('run_id')})"
        " ORDER BY run_id DESC LIMIT ?",
        (goal_id, m.get("run", 0), d.list_param(active), MAX_LISTED),
    )
    answers = c.execute(
        "SELECT item_id, kind, rule, status, title, answer FROM inbox WHERE goal_id = ?"
        " AND status IN ('answered', 'approved', 'consumed', 'denied', 'dismissed')"
        " AND run_id IS NULL AND (kind != 'notice' OR rule = 'nudge')"
        f" AND (item_id > ? OR {d.in_list('item_id')})"
        " ORDER BY item_id DESC LIMIT ?",
        (goal_id, m.get("item", 0), d.list_param(seen_items), MAX_LISTED),
    )
    if marks is None:  # first check-in: what happened since the goal was created
        world_where, world_args = "taken_at >= ?", (created_at,)
        event_where, event_args = "created_at >= ?", (created_at,)
    else:
        world_where, world_args = "snapshot_id > ?", (m.get("snapshot", 0),)
        event_where, event_args = "event_id > ?", (m.get("event", 0),)
    # A source seen for the first time (`"new"`: first boot, a source added) is a baseline:
    # only a snapshot with a real change counts.
    world = c.execute(
        f"SELECT changes FROM world WHERE agent = ? AND {world_where}"
        f" AND {d.has_member_but('world.changes', 'new')} ORDER BY snapshot_id DESC",
        (agent, *world_args),
    ).fetchall()  # fmt: skip
    events = c.execute(
        f"SELECT event_id, name, data FROM events WHERE {event_where}"
        f" AND ({d.in_list('name')} OR {d.jnum('data', 'goal_id')} = ?)"
        " ORDER BY event_id DESC", (*event_args, d.list_param(triggers), goal_id),
    ).fetchall()  # fmt: skip
    reported = set(m.get("overdue", []))
    overdue = [
        {"item_id": r[0], "kind": r[1], "title": r[2]}
        for r in c.execute(
            "SELECT item_id, kind, title FROM inbox WHERE goal_id = ? AND status = 'open'"
            " AND kind IN ('question', 'approval') AND coalesce(rule, '') NOT IN ("
            "'clarify', 'achieved') AND (expires_at <= ?"
            f" OR coalesce({d.jnum('data', 'posted_at')}, created_at) <= ?) ORDER BY item_id",
            (goal_id, now, now - overdue_after_s),
        )
        if r[0] not in reported
    ]
    return {
        "runs_finished": [{"run_id": r[0], "status": r[1], "summary": r[2]} for r in runs],
        "answers": [
            dict(zip(("item_id", "kind", "rule", "status", "title", "answer"), r, strict=True))
            for r in answers
        ],
        "world_changes": len(world),
        # Every change since the last look (oldest first, bounded): at a slow pace several
        # happen between looks, and the model must see the older ones too.
        "world_samples": [json.loads(r[0]) for r in reversed(world[:MAX_WORLD_SAMPLES])],
        "events": len(events),
        "event_samples": [
            {"event_id": e[0], "name": e[1], "data": json.loads(e[2])} for e in events[:5]
        ],
        "overdue_items": overdue,
    }
