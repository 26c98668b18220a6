"""The operator's side of the inbox: answer questions, approve (optionally with edits) or deny
approvals, dismiss notices. Each is one short transaction; the daemon applies it within a second,
or at its next start if it is stopped.
"""

from __future__ import annotations

import time
from typing import Any

from agentd.config import Config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.decide import Menu
from agentd.errors import ModelOutputInvalid, Refused, UsageError
from agentd.models import JSON, InboxItem, InboxKind, InboxStatus, action_digest


def _open_item(c: Any, item_id: int, kind: InboxKind | None = None) -> InboxItem:
    item = qi.get_item(c, item_id)
    if kind is not None and item.kind != kind:
        raise Refused(f"inbox item {item_id} is a {item.kind}, not a {kind}")
    if item.status != InboxStatus.OPEN:
        raise Refused(f"inbox item {item_id} is already {item.status}")
    return item


def answer(store: SyncStore, item_id: int, text: str) -> InboxItem:
    if not text.strip():
        raise UsageError("the answer is empty; say something the run can use")

    def work(c: Any) -> InboxItem:
        _open_item(c, item_id, InboxKind.QUESTION)
        return qi.resolve(c, item_id, InboxStatus.ANSWERED, answer=text)

    return store.write(work)


def approve(
    store: SyncStore, config: Config, item_id: int, edit: JSON | None = None, note: str = ""
) -> InboxItem:
    """Grant an approval for exactly its action and arguments — or for edited arguments, which
    are validated against the action's schema and bound by a new digest."""

    def work(c: Any) -> InboxItem:
        item = _open_item(c, item_id, InboxKind.APPROVAL)
        if item.expires_at is not None and item.expires_at.timestamp() <= time.time():
            # Expired while nobody (or no daemon) closed it: too late to grant, whatever the
            # daemon's state; it will be closed as expired.
            raise Refused(
                f"inbox item {item_id} expired at {item.expires_at:%Y-%m-%d %H:%M:%S} UTC; "
                "it can no longer be approved (the run is told it expired)"
            )
        if edit is None:
            return qi.resolve(c, item_id, InboxStatus.APPROVED, answer=note or "approved")
        agent = config.agents.get(q.get_run(c, item.run_id).agent) if item.run_id else None
        if agent is None or item.action is None:
            raise Refused(f"inbox item {item_id}: its agent is no longer configured; cannot edit")
        try:
            args = Menu(config, agent).validate_args(item.action, {**(item.args or {}), **edit})
        except ModelOutputInvalid as e:
            raise UsageError(f"--edit: {e}") from None
        return qi.resolve(
            c,
            item_id,
            InboxStatus.APPROVED,
            answer=note or "approved with edits",
            args=args,
            digest=action_digest(item.action, args),
            extra={"original_args": item.args, "original_digest": item.digest},
        )

    return store.write(work)


def deny(store: SyncStore, item_id: int, reason: str = "") -> InboxItem:
    def work(c: Any) -> InboxItem:
        _open_item(c, item_id, InboxKind.APPROVAL)
        return qi.resolve(c, item_id, InboxStatus.DENIED, answer=reason or "denied by the operator")

    return store.write(work)


def dismiss(store: SyncStore, item_id: int) -> InboxItem:
    def work(c: Any) -> InboxItem:
        _open_item(c, item_id, InboxKind.NOTICE)
        return qi.resolve(c, item_id, InboxStatus.DISMISSED)

    return store.write(work)
