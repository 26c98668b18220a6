"""Queries on inbox items (questions, approvals, notices) and events.

An approval moves open → approved → consumed exactly once; `consume_approval` is the only way to
consume one and it checks the digest of what is about to execute.
"""

from __future__ import annotations

import json
from typing import Any

from agentd.db import stamp, wake
from agentd.db.conn import Conn, new_id, returned_id
from agentd.db.rows import json_col
from agentd.errors import NotFound, Refused
from agentd.models import JSON, Event, InboxItem, InboxKind, InboxStatus, from_ts
from agentd.text import cut_at_word

ITEM_COLS = (
    "item_id, kind, status, goal_id, run_id, title, body, action, args, digest, rule, answer,"
    " created_at, expires_at, resolved_at, data"
)


def item_from_row(r: tuple[Any, ...]) -> InboxItem:
    return InboxItem(
        item_id=r[0],
        kind=InboxKind(r[1]),
        status=InboxStatus(r[2]),
        goal_id=r[3],
        run_id=r[4],
        title=r[5],
        body=r[6],
        action=r[7],
        args=None if r[8] is None else json.loads(r[8]),
        digest=r[9],
        rule=r[10],
        answer=r[11],
        created_at=from_ts(r[12]),  # type: ignore[arg-type]  # NOT NULL column
        expires_at=from_ts(r[13]),
        resolved_at=from_ts(r[14]),
        data=json.loads(r[15]),
    )


def post(
    c: Conn,
    kind: InboxKind,
    *,
    title: str,
    body: str = "",
    goal_id: int | None = None,
    run_id: int | None = None,
    seq: int | None = None,
    action: str | None = None,
    args: JSON | None = None,
    digest: str | None = None,
    rule: str | None = None,
    expires_at: float | None = None,
    data: JSON | None = None,
) -> int:
    cur = c.execute(
        "INSERT INTO inbox (kind, status, goal_id, run_id, seq, title, body, action, args, digest,"
        " rule, data, created_at, expires_at) VALUES (?, 'open', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " RETURNING item_id",
        (
            kind,
            goal_id,
            run_id,
            seq,
            cut_at_word(title),  # a title is cut at a word, wherever it came from
            body,
            action,
            json_col(args),
            digest,
            rule,
            json_col(data or {}),
            stamp.now(c),
            expires_at,
        ),
    )
    return new_id(cur)


def get_item(c: Conn, item_id: int) -> InboxItem:
    row = c.execute(f"SELECT {ITEM_COLS} FROM inbox WHERE item_id = ?", (item_id,)).fetchone()
    if row is None:
        raise NotFound(f"no inbox item {item_id}; `agentd inbox list` shows the open items")
    return item_from_row(row)


def list_items(
    c: Conn, *, status: str | None = "open", run_id: int | None = None
) -> list[InboxItem]:
    where: list[str] = []
    params: list[Any] = []
    if status:
        where.append("status = ?")
        params.append(status)
    if run_id is not None:
        where.append("run_id = ?")
        params.append(run_id)
    sql = f"SELECT {ITEM_COLS} FROM inbox"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return [item_from_row(r) for r in c.execute(sql + " ORDER BY item_id", params)]


def resolve(
    c: Conn,
    item_id: int,
    status: InboxStatus,
    *,
    answer: str | None = None,
    args: JSON | None = None,
    digest: str | None = None,
    extra: JSON | None = None,
) -> InboxItem:
    """Close an open item (answer, approve, deny, expire, dismiss); refused unless it is open."""
    item = get_item(c, item_id)
    if item.status != InboxStatus.OPEN:
        raise Refused(f"inbox item {item_id} is already {item.status}")
    data = {**item.data, **(extra or {})}
    edited, now = args is not None, stamp.now(c)
    resolved = c.execute(
        "UPDATE inbox SET status = ?, answer = ?, resolved_at = ?, data = ?,"
        " args = coalesce(?, args), digest = coalesce(?, digest), edited = ?"
        " WHERE item_id = ? AND status = 'open'",
        (status, answer, now, json_col(data), json_col(args), digest, int(edited), item_id),
    ).rowcount
    if resolved != 1:  # closed by another process since the read (its commit came first)
        raise Refused(f"inbox item {item_id} is already {get_item(c, item_id).status}")
    wake.notify_peers(c)  # a run waiting on it may be woken by any daemon sharing the database
    return get_item(c, item_id)


def consume_approval(c: Conn, item_id: int, digest: str, key: str) -> InboxItem:
    """Mark an approved item used by the execution `key` — only if it approves exactly `digest`
    and was granted before it expired."""
    cur = c.execute(
        "UPDATE inbox SET status = 'consumed', consumed_by = ?"
        " WHERE item_id = ? AND kind = 'approval' AND status = 'approved' AND digest = ?"
        " AND (expires_at IS NULL OR resolved_at <= expires_at)",
        (key, item_id, digest),
    )
    if cur.rowcount != 1:
        raise Refused(f"inbox item {item_id} is not an unused approval of digest {digest[:12]}")
    return get_item(c, item_id)


def due_for_expiry(c: Conn, now: float) -> list[InboxItem]:
    rows = c.execute(
        f"SELECT {ITEM_COLS} FROM inbox WHERE status = 'open' AND expires_at <= ?", (now,)
    )
    return [item_from_row(r) for r in rows]


def expiring(c: Conn, item_id: int) -> InboxItem:
    """The item as it stands, read first thing in the write transaction that expires it or
    reminds about it, after the "inbox_expiry" singleton: with several daemons on one database,
    one at a time decides (else both post the reminder, or both push the expiry)."""
    c.dialect.singleton(c, "inbox_expiry")
    return get_item(c, item_id)


def next_expiry(c: Conn) -> float | None:
    """When the next open item expires (the scheduler sleeps until then at most)."""
    row = c.execute("SELECT min(expires_at) FROM inbox WHERE status = 'open'").fetchone()
    return None if row[0] is None else float(row[0])


def push_expiry(c: Conn, item_id: int, expires_at: float, reminders: int) -> None:
    item = get_item(c, item_id)
    c.execute(
        "UPDATE inbox SET expires_at = ?, data = ? WHERE item_id = ?",
        (expires_at, json_col({**item.data, "reminders": reminders}), item_id),
    )


def withdraw_open_items(c: Conn, run_id: int, reason: str) -> int:
    """Expire a run's open questions/approvals and its granted-but-unused approvals (the run
    ended or no longer needs them): the audit trail never shows an approval that never ran."""
    return c.execute(
        "UPDATE inbox SET status = 'expired', answer = ?, resolved_at = ?"
        " WHERE run_id = ? AND kind != 'notice' AND (status = 'open'"
        " OR (kind = 'approval' AND status = 'approved'))",
        (reason, stamp.now(c), run_id),
    ).rowcount


def withdraw_item(c: Conn, item_id: int, reason: str) -> None:
    """Close one open or granted-but-unused item as expired, with the reason."""
    c.execute(
        "UPDATE inbox SET status = 'expired', answer = ?, resolved_at = ?"
        " WHERE item_id = ? AND status IN ('open', 'approved')",
        (reason, stamp.now(c), item_id),
    )


# ── events ───────────────────────────────────────────────────────────────────────────────────────

EVENT_COLS = "event_id, name, data, dedupe_key, created_at, source"


def event_from_row(r: tuple[Any, ...]) -> Event:
    return Event(
        event_id=r[0],
        name=r[1],
        data=json.loads(r[2]),
        dedupe_key=r[3],
        created_at=from_ts(r[4]),  # type: ignore[arg-type]  # NOT NULL column
        source=r[5],
    )


def add_event(
    c: Conn, name: str, data: JSON, dedupe_key: str | None, source: str = "cli"
) -> int | None:
    """Store an event; None when an event with the same dedupe key already exists.

    Events commit in id order, one writer at a time (a singleton): the trigger cursor and the
    waits read "events after id N", which a smaller id committing later would slip under."""
    c.dialect.singleton(c, "events")
    cur = c.execute(
        "INSERT INTO events (name, data, dedupe_key, source, created_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (dedupe_key) DO NOTHING RETURNING event_id",
        (name, json_col(data), dedupe_key, source, stamp.now(c)),
    )
    event_id = returned_id(cur)
    if event_id is not None:
        wake.notify_peers(c)  # runs waiting on it, triggers listening for it: on any daemon
    return event_id


def event_by_key(c: Conn, dedupe_key: str) -> Event | None:
    """The event recorded under a dedupe key, if any (what a duplicate `event send` names)."""
    row = c.execute(f"SELECT {EVENT_COLS} FROM events WHERE dedupe_key = ?", (dedupe_key,))
    found = row.fetchone()
    return None if found is None else event_from_row(found)


def events_after(c: Conn, event_id: int, limit: int = 500) -> list[Event]:
    rows = c.execute(
        f"SELECT {EVENT_COLS} FROM events WHERE event_id > ? ORDER BY event_id LIMIT ?",
        (event_id, limit),
    )
    return [event_from_row(r) for r in rows]


def last_event_id(c: Conn) -> int:
    return int(c.execute("SELECT coalesce(max(event_id), 0) FROM events").fetchone()[0])


def events_since(c: Conn, since: int | None, limit: int) -> tuple[int, list[Event]]:
    """What a run's look sees of the events: the id it has now seen up to, and the events after
    `since` (the previous look's; None: the run's first look, which lists none), at most `limit`.

    The last id is read first (one read, not two, when none arrived). On PostgreSQL an event may
    commit between the two reads: it is listed, and the id seen up to covers it — shown once,
    not again at the next look."""
    seen = last_event_id(c)
    if since is None or seen <= since:
        return seen, []
    new = events_after(c, since, limit=limit)
    return max([seen, *(e.event_id for e in new)]), new


def events_by_source(c: Conn) -> dict[str, tuple[int, Any]]:
    """Per inbound hook (`hook:NAME`): its events recorded, and when the last one was."""
    rows = c.execute(
        "SELECT source, count(*), max(created_at) FROM events WHERE source LIKE 'hook:%'"
        " GROUP BY source"
    )
    return {str(s): (int(n), from_ts(t)) for s, n, t in rows}


def list_events(c: Conn, limit: int = 50) -> list[Event]:
    rows = c.execute(f"SELECT {EVENT_COLS} FROM events ORDER BY event_id DESC LIMIT ?", (limit,))
    return [event_from_row(r) for r in rows]
