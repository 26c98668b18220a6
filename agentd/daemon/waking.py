"""What a wake records and what it matches: the WAKE step's data for an answered inbox item, and an
event wait's `match` against an event's data (agentd/daemon/scheduler.py)."""

from __future__ import annotations

from agentd.models import JSON, InboxItem


def inbox_wake(wait: JSON, item: InboxItem) -> JSON:
    return {
        "woke_by": "inbox",
        "why": wait.get("why"),
        "item_id": item.item_id,
        "item_kind": str(item.kind),
        "status": str(item.status),
        "answer": item.answer,
        "action": item.action,
        "args": item.args,
        "edited": bool(item.data.get("original_args")),
    }


def matches(match: JSON, data: JSON) -> bool:
    return all(data.get(k) == v for k, v in match.items())
