"""Notification channels: the Protocol, the registry, and the words every channel shares.
A surface inside the daemon: may import views/, the operator layer and everything below them.

A channel takes one outbox message (a JSON dict planned by agentd/notify/plan.py, made `inert`
by the sender) and delivers it, or raises DeliveryFailed; the outbox retries. Messages carry what
an item is and a link to the web inbox — never a token or anything that approves by itself.
"""

from __future__ import annotations

from typing import Protocol

from agentd.config.notify import EmailNotify, NotifierConfig, NtfyNotify, WebhookNotify
from agentd.models import JSON
from agentd.text import cut_at_word, safe

PRIORITY_LEVEL = {"min": 1, "low": 2, "default": 3, "high": 4, "urgent": 5}


class Channel(Protocol):
    async def send(self, message: JSON, *, message_id: str, timestamp: int) -> None:
        """Deliver one message (the same `message_id` on every retry); raise DeliveryFailed."""
        ...


def build(name: str, cfg: NotifierConfig) -> Channel:
    # Imported here: each member pulls its own client library only when configured.
    if isinstance(cfg, WebhookNotify):
        from agentd.notify.webhook import Webhook

        return Webhook(name, cfg)
    if isinstance(cfg, NtfyNotify):
        from agentd.notify.ntfy import Ntfy

        return Ntfy(name, cfg)
    if isinstance(cfg, EmailNotify):
        from agentd.notify.smtp import Email

        return Email(name, cfg)
    raise AssertionError(f"unknown notifier type {cfg!r}")


def inert(message: JSON) -> JSON:
    """The message with every text made inert (agentd.views.records.safe): no ESC, control, bidi or
    invisible character reaches a mail subject, a push title or a terminal mail reader, where they
    could recolour, reorder or hide what the operator reads. The body keeps its line breaks."""
    return {
        key: safe(value, multiline=key == "body", continuation="")
        if isinstance(value, str)
        else value
        for key, value in message.items()
    }


def subject(message: JSON) -> str:
    """One line: what the item is and whether this is a reminder or the escalation."""
    what = {
        "approval": "approval needed",
        "question": "question",
        "nudge": "suggestion",
        "notice": "notice",
        "failure": "run failed",
    }.get(str(message.get("category")), "inbox")
    title = cut_at_word(" ".join(str(message.get("title", "")).split()), 150)
    stage = int(message.get("stage", 0))
    # What the item is comes first, then which message about it this is: "agentd approval
    # needed (item 8, reminder 1): approve restart?", never "reminder 1: … still waits".
    which = f"item {message.get('item_id')}"
    if message.get("escalation"):
        return f"agentd ESCALATION: {what}, unanswered ({which}): {title}"
    if stage > 0:
        which += f", reminder {stage}"
    return f"agentd {what} ({which}): {title}"


def text(message: JSON) -> str:
    """The plain-text body: the item, its goal, and how to act on it."""
    lines = [subject(message), ""]
    if message.get("goal_id") is not None:
        lines.append(f"goal {message['goal_id']}: {message.get('goal', '')}")
    if message.get("run_id") is not None:
        lines.append(f"run {message['run_id']} (agent {message.get('agent', '')})")
    if message.get("action"):
        lines.append(f"action: {message['action']}")
    if message.get("body"):
        lines += ["", str(message["body"])]
    lines += ["", f"open it: {message['url']}" if message.get("url") else "",
              f"or: agentd inbox show {message.get('item_id')}"]  # fmt: skip
    return "\n".join(line for line in lines if line is not None).strip() + "\n"
