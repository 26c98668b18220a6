"""Queries on the notification outbox: the queue of new inbox items (filled by a trigger), the
outbox rows (one per item, channel and reminder stage, unique by `dedupe_key`), their attempts, and
each channel's health for `doctor` and `status`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentd.db.conn import Conn
from agentd.db.rows import json_col
from agentd.models import JSON

ROW_COLS = "outbox_id, dedupe_key, channel, item_id, goal_id, stage, message, attempts, created_at"


@dataclass(frozen=True)
class OutboxRow:
    outbox_id: int
    dedupe_key: str
    channel: str
    item_id: int | None
    goal_id: int | None
    stage: int
    message: JSON
    attempts: int
    created_at: float


def _row(r: tuple[Any, ...]) -> OutboxRow:
    return OutboxRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8])


def queued(c: Conn, limit: int = 200) -> list[int]:
    """Inbox items posted since the last planning, oldest first."""
    rows = c.execute("SELECT item_id FROM notify_queue ORDER BY item_id LIMIT ?", (limit,))
    return [int(r[0]) for r in rows]


def dequeue(c: Conn, item_id: int) -> None:
    c.execute("DELETE FROM notify_queue WHERE item_id = ?", (item_id,))


def clear_queue(c: Conn) -> int:
    """Drop every queued item at once (no agent notifies anywhere: nothing to plan)."""
    return c.execute("DELETE FROM notify_queue").rowcount


def add(
    c: Conn,
    *,
    key: str,
    channel: str,
    item_id: int | None,
    goal_id: int | None,
    stage: int,
    message: JSON,
    due_at: float,
    now: float,
) -> bool:
    """One message to send at `due_at`; False when a row with this key exists already."""
    cur = c.execute(
        "INSERT INTO outbox (dedupe_key, channel, item_id, goal_id, stage, message, status,"
        " next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
        " ON CONFLICT(dedupe_key) DO NOTHING",
        (key, channel, item_id, goal_id, stage, json_col(message), due_at, now),
    )
    return cur.rowcount == 1


def cancel_closed(c: Conn) -> int:
    """Pending messages about items answered, closed or gone: reminders stop here."""
    return c.execute(
        "UPDATE outbox SET status = 'cancelled' WHERE status = 'pending' AND item_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.item_id = outbox.item_id"
        " AND i.status = 'open')"
    ).rowcount


def due(c: Conn, now: float, limit: int = 50) -> list[OutboxRow]:
    rows = c.execute(
        f"SELECT {ROW_COLS} FROM outbox WHERE status = 'pending' AND next_attempt_at <= ?"
        " ORDER BY next_attempt_at, outbox_id LIMIT ?",
        (now, limit),
    )
    return [_row(r) for r in rows]


def next_due_at(c: Conn) -> float | None:
    row = c.execute("SELECT min(next_attempt_at) FROM outbox WHERE status = 'pending'").fetchone()
    return None if row[0] is None else float(row[0])


def has_queued(c: Conn) -> bool:
    return c.execute("SELECT 1 FROM notify_queue LIMIT 1").fetchone() is not None


def defer(c: Conn, outbox_id: int, until: float) -> None:
    """Hold a message back (quiet hours) without counting an attempt."""
    c.execute(
        "UPDATE outbox SET next_attempt_at = ? WHERE outbox_id = ? AND status = 'pending'",
        (until, outbox_id),
    )


def hold_item(c: Conn, dedupe_key: str, stage: int, until: float) -> None:
    """Hold an item's message of `stage` (every channel's, not yet tried) until `until`, and move
    the item's later stages by as much: reminders and the escalation count from the first message,
    so quiet hours delay the rest of the schedule rather than release it at once when they end."""
    row = c.execute(
        "SELECT item_id, next_attempt_at FROM outbox WHERE dedupe_key = ? AND status = 'pending'",
        (dedupe_key,),
    ).fetchone()
    if row is None or row[1] >= until:
        return  # held already (by another channel's row of the item in this pass)
    # The key is "{item_id}.{posted_us}:{channel}:{stage}": its head names this posting of the
    # item (an item id that SQLite reused after retention is another item).
    head = dedupe_key.split(":", 1)[0] + ":"
    same_item = "item_id = ? AND substr(dedupe_key, 1, ?) = ? AND status = 'pending'"
    params = (row[0], len(head), head)
    c.execute(
        f"UPDATE outbox SET next_attempt_at = next_attempt_at + ? WHERE {same_item} AND stage > ?",
        (until - row[1], *params, stage),
    )
    c.execute(
        f"UPDATE outbox SET next_attempt_at = ? WHERE {same_item} AND stage = ? AND attempts = 0"
        " AND next_attempt_at < ?",
        (until, *params, stage, until),
    )


def sent(c: Conn, outbox_id: int, now: float) -> None:
    c.execute(
        "UPDATE outbox SET status = 'sent', attempts = attempts + 1, sent_at = ?,"
        " last_attempt_at = ?, last_error = NULL WHERE outbox_id = ?",
        (now, now, outbox_id),
    )


def attempt_failed(c: Conn, outbox_id: int, now: float, error: str, retry_at: float | None) -> None:
    """Record a failed attempt; `retry_at` None gives the message up (status failed)."""
    c.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ?, last_error = ?,"
        " status = CASE WHEN ? IS NULL THEN 'failed' ELSE status END,"
        " next_attempt_at = coalesce(?, next_attempt_at) WHERE outbox_id = ?",
        (now, error[:500], retry_at, retry_at, outbox_id),
    )


def channel_health(c: Conn) -> dict[str, JSON]:
    """Per channel: messages pending and given up, when one was last sent, and whether its latest
    attempt failed (`failing`, with the error) — what `doctor` and `status` show."""
    out: dict[str, JSON] = {}
    rows = c.execute(
        "SELECT channel, sum(status = 'pending'), sum(status = 'failed'), max(sent_at)"
        " FROM outbox GROUP BY channel ORDER BY channel"
    )
    for channel, pending, failed, last_sent in rows.fetchall():
        latest = c.execute(
            "SELECT status, last_error, last_attempt_at FROM outbox WHERE channel = ?"
            " AND last_attempt_at IS NOT NULL ORDER BY last_attempt_at DESC LIMIT 1",
            (channel,),
        ).fetchone()
        failing = latest is not None and latest[0] != "sent" and latest[1] is not None
        out[channel] = {
            "pending": int(pending or 0),
            "failed": int(failed or 0),
            "last_sent_at": last_sent,
            "failing": failing,
            "error": latest[1] if failing else None,
            "last_attempt_at": latest[2] if latest is not None else None,
        }
    return out


def prune(c: Conn, older_than: float) -> int:
    """Finished messages older than the horizon."""
    return c.execute(
        "DELETE FROM outbox WHERE status != 'pending' AND created_at < ?", (older_than,)
    ).rowcount
