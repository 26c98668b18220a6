"""`agentd doctor`'s words for an imap source's look: it logged in read-only, found the mailbox's
size and whether the server offers IDLE (without it, new mail is polled for)."""

from __future__ import annotations

from typing import Any


def mailbox_said(obs: dict[str, Any]) -> str:
    """`logged in (read-only); INBOX: 12 messages (3 unseen, 1.2 MB); IDLE offered`."""
    size = f", {obs['size_bytes'] / 1e6:.1f} MB" if obs.get("size_bytes") is not None else ""
    idle = "IDLE offered" if obs.get("idle") else "no IDLE: new mail is polled for"
    return (
        f"logged in (read-only); {obs['mailbox']}: {obs.get('messages', 0)} messages "
        f"({obs.get('unseen', 0)} unseen{size}); {idle}"
    )
