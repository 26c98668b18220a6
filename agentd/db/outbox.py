"""Queries on the notification outbox: the queue of new inbox items (filled by a trigger), the
outbox rows (one per item, channel and reminder stage, unique by `dedupe_key`), their attempts, and
each channel's health for `doctor` and `status` (with what quiet hours hold and what will be late)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentd.db.conn import Conn
from agentd.db.rows import json_col
from agentd.models import JSON

ROW_COLS = (
    "outbox_id, dedupe_key, channel, item_id, goal_id, stage, message, attempts, created_at,"
    " next_attempt_at, held_until, held_tz"
)
HELD_LISTED = 50  # held and late messages listed per channel (all are counted)


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
    next_attempt_at: float = 0.0
    held_until: float | None = None  # held by quiet hours until then (= next_attempt_at)
    held_tz: str | None = None  # the zone of those quiet hours


def _row(r: tuple[Any, ...]) -> OutboxRow:
    return OutboxRow(
        r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[8], r[9], r[10], r[11]
    )


def queued(c: Conn, limit: int = 200) -> list[int]:
    """Inbox items posted since the last planning, oldest first. A planner takes the
    "notify_queue" singleton first (notify/plan.py): two daemons never expand the same items."""
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


# ── claims: one daemon sends a message at a time ─────────────────────────────────────────────────
#
# Several daemons may share the database (PostgreSQL). A daemon attempts a message only once it
# holds the row's claim (`claimed_by`, until `claim_expires_at` on the database's clock), taken in
# the transaction that picks the due rows (`due` with SKIP LOCKED, then `claim`) and let go with
# the attempt's outcome (`sent`, `attempt_failed`). Delivery stays at least once: a daemon that
# dies mid-send leaves its claim to lapse after CLAIM_S, and the message is sent again, with the
# same id, by whichever daemon picks it next.

CLAIM_S = 180.0  # database seconds: above one attempt's bound (a channel's timeout_s ≤ 120 s)


def _claimable(c: Conn) -> str:
    """Rows the owner (the next parameter) may take: nobody's, its own, or lapsed."""
    return f"(claimed_by IS NULL OR claimed_by = ? OR claim_expires_at < {c.dialect.now_sql})"


def due(c: Conn, now: float, limit: int = 50, owner: str | None = None) -> list[OutboxRow]:
    """Pending messages due at `now`, soonest first. With `owner`, in a write transaction: only
    those it may claim, locked until it commits, skipping rows another daemon is claiming."""
    free, params = ("", ()) if owner is None else (f" AND {_claimable(c)}", (owner,))
    rows = c.execute(
        f"SELECT {ROW_COLS} FROM outbox WHERE status = 'pending' AND next_attempt_at <= ?{free}"
        f" ORDER BY next_attempt_at, outbox_id LIMIT ?{c.dialect.skip_locked}",
        (now, *params, limit),
    )
    return [_row(r) for r in rows]


def claim(c: Conn, outbox_ids: list[int], owner: str, claim_s: float = CLAIM_S) -> None:
    """Take the claim on rows `due` picked (and locked) in this transaction."""
    if outbox_ids:
        d = c.dialect
        c.execute(
            f"UPDATE outbox SET claimed_by = ?, claim_expires_at = {d.now_sql} + ?"
            f" WHERE {d.in_list('outbox_id')}",
            (owner, claim_s, d.list_param(outbox_ids)),
        )


def release_others(c: Conn, owner: str) -> int:
    """At a daemon's start on SQLite, where the home lock makes it the database's only daemon:
    every claim but its own is a dead daemon's, let go now (its message goes again at once, as
    before claims). On PostgreSQL other owners may be alive: their claims lapse on their own."""
    if not c.dialect.sqlite:
        return 0
    return c.execute(
        "UPDATE outbox SET claimed_by = NULL, claim_expires_at = NULL"
        " WHERE claimed_by IS NOT NULL AND claimed_by != ?",
        (owner,),
    ).rowcount


def next_due_at(c: Conn, owner: str | None = None) -> float | None:
    """When the next pending message is due; with `owner`, not counting messages another
    daemon is sending (a claim of theirs would otherwise look due to us until it ends)."""
    free, params = ("", ()) if owner is None else (f" AND {_claimable(c)}", (owner,))
    row = c.execute(
        f"SELECT min(next_attempt_at) FROM outbox WHERE status = 'pending'{free}", params
    ).fetchone()
    return None if row[0] is None else float(row[0])


def has_queued(c: Conn) -> bool:
    return c.execute("SELECT 1 FROM notify_queue LIMIT 1").fetchone() is not None


def has_held(c: Conn) -> bool:
    return (
        c.execute(
            "SELECT 1 FROM outbox WHERE status = 'pending' AND held_until IS NOT NULL LIMIT 1"
        ).fetchone()
        is not None
    )


def held(c: Conn) -> list[tuple[OutboxRow, float | None]]:
    """The messages quiet hours hold, each with its item's expiry (None: none, or no item)."""
    rows = c.execute(
        f"SELECT {', '.join('o.' + col for col in ROW_COLS.split(', '))}, i.expires_at"
        " FROM outbox o LEFT JOIN inbox i ON i.item_id = o.item_id"
        " WHERE o.status = 'pending' AND o.held_until IS NOT NULL ORDER BY o.outbox_id"
    )
    return [(_row(r[:-1]), r[-1]) for r in rows]


def move(c: Conn, row: OutboxRow, until: float, tz: str | None, *, later: bool, now: float) -> bool:
    """Move a pending message to `until`: held by quiet hours in zone `tz`, or released (`tz`
    None, `until` now). With `later` (a first try, not a retry) the item's later stages on this
    channel move by as much, earlier too: reminders and the escalation count from the message
    actually sent, so a hold delays the rest of the schedule rather than release it in a burst,
    and a release brings it back. False when the row changed since it was read (sent, retried).

    `now` guards a release: a later stage is never moved into the past of what is due now."""
    cur = c.execute(
        "UPDATE outbox SET next_attempt_at = ?, held_until = ?, held_tz = ? WHERE outbox_id = ?"
        " AND status = 'pending' AND attempts = ? AND next_attempt_at = ?",
        (until, None if tz is None else until, tz, row.outbox_id, row.attempts,
         row.next_attempt_at),
    )  # fmt: skip
    if cur.rowcount != 1:
        return False
    delta = until - row.next_attempt_at
    if later and row.item_id is not None and delta:
        # The key is "{item_id}.{posted_us}:{channel}:{stage}": its head names this posting of
        # the item (an item id that SQLite reused after retention is another item).
        head = row.dedupe_key.split(":", 1)[0] + ":"
        d = c.dialect
        c.execute(
            f"UPDATE outbox SET next_attempt_at = {d.greatest('next_attempt_at + ?', '?')},"
            " held_until = CASE WHEN held_until IS NULL THEN NULL"
            f" ELSE {d.greatest('held_until + ?', '?')} END"
            " WHERE item_id = ? AND substr(dedupe_key, 1, ?) = ? AND channel = ?"
            " AND status = 'pending' AND stage > ?",
            (delta, now, delta, now, row.item_id, len(head), head, row.channel, row.stage),
        )
    return True


def sent(c: Conn, outbox_id: int, now: float) -> None:
    """Record a delivery (whoever holds the claim now: the message did go) and let go."""
    c.execute(
        "UPDATE outbox SET status = 'sent', attempts = attempts + 1, sent_at = ?,"
        " last_attempt_at = ?, last_error = NULL, held_until = NULL, claimed_by = NULL,"
        " claim_expires_at = NULL WHERE outbox_id = ?",
        (now, now, outbox_id),
    )


def attempt_failed(
    c: Conn,
    outbox_id: int,
    now: float,
    error: str,
    retry_at: float | None,
    owner: str | None = None,
) -> None:
    """Record a failed attempt and let go; `retry_at` None gives the message up (status failed).
    Only while the message is pending and `owner`'s (or nobody's): after a claim that lapsed,
    the daemon that took it over says how its attempt went, and a message sent stays sent."""
    c.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ?, last_error = ?,"
        " held_until = NULL, held_tz = NULL, claimed_by = NULL, claim_expires_at = NULL,"
        " status = CASE WHEN CAST(? AS DOUBLE PRECISION) IS NULL THEN 'failed' ELSE status END,"
        " next_attempt_at = coalesce(?, next_attempt_at) WHERE outbox_id = ?"
        " AND status = 'pending' AND (claimed_by IS NULL OR claimed_by = ?)",
        (now, error[:500], retry_at, retry_at, outbox_id, owner),
    )


def channel_health(c: Conn) -> dict[str, JSON]:
    """Per channel: messages pending and given up, when one was last sent, and whether its latest
    attempt failed (`failing`, with the error) — what `doctor` and `status` show. Also what quiet
    hours hold (`held`: how many; `held_items`: each one's item, category, stage, `until` and the
    zone `tz`) and the first messages that will arrive after their item expires (`late`)."""
    out: dict[str, JSON] = {}
    held_rows, late_rows = _held_and_late(c)
    rows = c.execute(
        "SELECT channel, count(*) FILTER (WHERE status = 'pending'),"
        " count(*) FILTER (WHERE status = 'failed'), max(sent_at)"
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
            "held": len(held_rows.get(channel, [])),
            "held_items": held_rows.get(channel, [])[:HELD_LISTED],
            "late": late_rows.get(channel, [])[:HELD_LISTED],
        }
    return out


def _held_and_late(c: Conn) -> tuple[dict[str, list[JSON]], dict[str, list[JSON]]]:
    """Per channel, the messages held by quiet hours (soonest first), and the first messages
    of open items whose next try comes after the item expires. A message about an item closed
    since is not held: the sender's next pass cancels it (`cancel_closed`)."""
    held: dict[str, list[JSON]] = {}
    rows = c.execute(
        f"SELECT channel, item_id, stage, {c.dialect.jtext('message', 'category')}, held_until,"
        " held_tz FROM outbox WHERE status = 'pending' AND held_until IS NOT NULL AND (item_id IS NULL"
        " OR EXISTS (SELECT 1 FROM inbox i WHERE i.item_id = outbox.item_id AND i.status = 'open'))"
        " ORDER BY held_until, outbox_id"
    )
    for channel, item_id, stage, category, until, tz in rows.fetchall():
        held.setdefault(channel, []).append({"item_id": item_id, "stage": stage,
                                             "category": category, "until": until, "tz": tz})  # fmt: skip
    late: dict[str, list[JSON]] = {}
    rows = c.execute(
        f"SELECT o.channel, o.item_id, {c.dialect.jtext('o.message', 'category')},"
        " o.next_attempt_at,"
        " i.expires_at, o.held_tz FROM outbox o JOIN inbox i ON i.item_id = o.item_id"
        " WHERE o.status = 'pending' AND o.stage = 0 AND i.status = 'open'"
        " AND i.expires_at IS NOT NULL AND o.next_attempt_at > i.expires_at"
        " ORDER BY o.next_attempt_at, o.outbox_id"
    )
    for channel, item_id, category, next_at, expires_at, tz in rows.fetchall():
        late.setdefault(channel, []).append({"item_id": item_id, "category": category,
                                             "next_at": next_at, "expires_at": expires_at,
                                             "tz": tz})  # fmt: skip
    return held, late


def prune(c: Conn, older_than: float, *, limit: int = 500) -> int:
    """Finished messages older than the horizon, at most `limit` of them: a chunk, repeated
    until none is left (Store.write_chunks). One daemon at a time: retention's singleton."""
    c.dialect.singleton(c, "retention")
    return c.execute(
        "DELETE FROM outbox WHERE outbox_id IN (SELECT outbox_id FROM outbox"
        " WHERE status != 'pending' AND created_at < ? ORDER BY outbox_id LIMIT ?)",
        (older_than, limit),
    ).rowcount
