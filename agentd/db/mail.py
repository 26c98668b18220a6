"""The imap sources' cursors (UIDVALIDITY and the last UID announced, a `meta` row per source) and
the commit that records a batch of new mail as events together with the cursor it moves to."""

from __future__ import annotations

from agentd.db import items as qi
from agentd.db import meta
from agentd.db.conn import Conn
from agentd.models import JSON


def _key(source: str) -> str:
    return f"imap_cursor:{source}"


def cursor(c: Conn, source: str) -> tuple[int, int] | None:
    """(uidvalidity, last_uid) of an imap source, or None before its first connection."""
    raw = meta.get_meta(c, _key(source))
    validity, _, last = raw.partition(":")
    if not validity.isdigit() or not last.isdigit():
        return None
    return int(validity), int(last)


def dedupe_key(source: str, uidvalidity: int, message: JSON) -> str:
    """A message's event key: its Message-ID, else UIDVALIDITY:UID (per source). Each kind has
    its own prefix, as the reset's has: a Message-ID is the sender's text ("5:2", "reset:6")."""
    mid = str(message.get("message_id") or "").strip()
    if mid:
        return f"mail:{source}:id:{mid}"
    return f"mail:{source}:uid:{uidvalidity}:{message.get('uid')}"


def record_mail(
    c: Conn,
    source: str,
    uidvalidity: int,
    last_uid: int,
    messages: list[JSON],
    reset: tuple[int, int] | None = None,
) -> list[int]:
    """One transaction: an event `SOURCE.received` per new message (a Message-ID seen before is
    not announced again), `SOURCE.reset` when the mailbox was recreated, and the cursor. The
    cursor only moves forward within one UIDVALIDITY (two daemons following one mailbox, each
    announces each message once between them). Returns the new events' ids."""
    c.dialect.singleton(c, f"imap:{source}")
    before = cursor(c, source)
    if before is not None and before[0] == uidvalidity and before[1] >= last_uid and not reset:
        messages = [m for m in messages if int(m.get("uid", 0)) > before[1]]
        last_uid = before[1]
    ids: list[int] = []
    if reset is not None and (before is None or before[0] != uidvalidity):
        data: JSON = {"source": source, "uidvalidity_was": reset[0], "uidvalidity": uidvalidity,
                      "note": "the mailbox was recreated: announcing from its newest message on"}  # fmt: skip
        event_id = qi.add_event(c, f"{source}.reset", data, f"mail:{source}:reset:{uidvalidity}",
                                source="imap")  # fmt: skip
        ids += [event_id] if event_id is not None else []
    for message in messages:
        data = {"source": source, **message}
        event_id = qi.add_event(
            c, f"{source}.received", data, dedupe_key(source, uidvalidity, message), source="imap"
        )
        if event_id is not None:
            ids.append(event_id)
    meta.set_meta(c, _key(source), f"{uidvalidity}:{last_uid}")
    return ids
