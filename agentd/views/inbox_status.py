"""An inbox item's status as the operator reads it: the stored status, except that an item
closed as `expired` because no one needed it any more (the watched service recovered, its run
ended or was cancelled, its goal closed) reads `withdrawn`. The schema keeps one `expired` for
both, so every reader of `status` (the runbook, the engine, the web inbox, MCP) is unchanged;
only the time-out path writes an answer starting `expired:` (agentd/daemon/scheduler.py)."""

from __future__ import annotations

from agentd.models import InboxItem, InboxStatus

WITHDRAWN = "withdrawn"
TIMED_OUT = "expired:"  # how the scheduler's answer to an item that got no answer in time starts


def shown_status(item: InboxItem) -> str:
    """`withdrawn` for an expired item its answer says was withdrawn, else the stored status."""
    if item.status == InboxStatus.EXPIRED and not (item.answer or "").startswith(TIMED_OUT):
        return WITHDRAWN
    return str(item.status)
