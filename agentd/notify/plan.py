"""What to send, where and when: new inbox items become outbox rows (first message, reminders,
escalation) per the agent's `[agents.X.notify]`; due rows are held back in the goal's quiet hours
(the check-in cadence's own logic) and dropped once their item is answered or closed. Runs inside
the daemon's write transactions; `now` is the daemon's clock."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from agentd.config import AgentConfig, Config
from agentd.config.notify import ChannelBase
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.conn import Conn
from agentd.errors import NotFound
from agentd.models import JSON, InboxItem, InboxKind, RunStatus
from agentd.notify.content import about
from agentd.outer import cadence

# The first message's priority by category; reminders keep it, the escalation is urgent.
PRIORITY = {"approval": "high", "failure": "high", "question": "default", "notice": "default",
            "nudge": "low"}  # fmt: skip
REMINDED = (InboxKind.APPROVAL, InboxKind.QUESTION)  # items that wait for an answer


def category(c: Conn, item: InboxItem) -> str:
    if item.kind != InboxKind.NOTICE:
        return str(item.kind)
    if item.rule == "nudge":
        return "nudge"
    if item.run_id is not None and item.title.startswith(f"run {item.run_id} failed"):
        try:  # the notice a failed run leaves (agentd/runs/control.py finish)
            if q.get_run(c, item.run_id).status == RunStatus.FAILED:
                return "failure"
        except NotFound:
            pass
    return "notice"


def _agent_of(c: Conn, item: InboxItem) -> tuple[str | None, str]:
    """The agent an item belongs to, and its goal's title."""
    agent, goal_title = None, ""
    try:
        if item.goal_id is not None:
            goal = q.get_goal(c, item.goal_id)
            agent, goal_title = goal.agent, goal.title
        if item.run_id is not None:
            agent = q.get_run(c, item.run_id).agent
    except NotFound:
        pass
    return agent, goal_title


def item_url(cfg: Config, item_id: int) -> str | None:
    """The web inbox's page of the item, when the control API listens on a TCP port."""
    port = cfg.web.port(cfg.api)
    return None if port is None else f"http://127.0.0.1:{port}/items/{item_id}"


def message_for(cfg: Config, item: InboxItem, what: str, agent: str, goal_title: str) -> JSON:
    """What every channel renders: what agentd/notify/content.py lets out about the item (never an
    approval's arguments or world), no token, nothing that approves."""
    title, body = about(item, what)
    return {
        "category": what,
        "kind": str(item.kind),
        "item_id": item.item_id,
        "goal_id": item.goal_id,
        "goal": goal_title,
        "run_id": item.run_id,
        "agent": agent,
        "title": title,
        "body": body,
        "action": item.action,
        "posted_at": item.created_at.astimezone(UTC).isoformat(),
        "url": item_url(cfg, item.item_id),
        "priority": PRIORITY[what],
        "stage": 0,
        "escalation": False,
    }


def plan_queued(c: Conn, cfg: Config, now: float) -> int:
    """Expand queued inbox items into outbox rows; returns the rows added. Each queued item leaves
    the queue in the transaction that plans it, so a crash plans it again (rows are unique).
    With no agent notifying anywhere the queue is dropped in one statement: a backlog (a restore,
    a bulk import) must not keep the daemon planning nothing, batch after batch."""
    if not any(a.notify.channels for a in cfg.agents.values()):
        outbox.clear_queue(c)
        return 0
    added = 0
    for item_id in outbox.queued(c):
        outbox.dequeue(c, item_id)
        try:
            item = qi.get_item(c, item_id)
        except NotFound:
            continue  # pruned before it was seen
        agent, goal_title = _agent_of(c, item)
        agent_cfg = cfg.agents.get(agent) if agent is not None else None
        if agent is None or agent_cfg is None:
            continue
        what = category(c, item)
        rules = agent_cfg.notify
        if what not in rules.on or not rules.channels:
            continue
        base = message_for(cfg, item, what, agent, goal_title)
        stages: list[tuple[int, float, list[str], JSON]] = [(0, now, rules.channels, base)]
        if item.kind in REMINDED:
            for n, after_s in enumerate(rules.remind_after, start=1):
                stages.append((n, now + after_s, rules.channels, {**base, "stage": n}))
            if rules.escalate_after is not None:
                n = len(rules.remind_after) + 1
                to = rules.escalate_to or rules.channels
                msg = {**base, "stage": n, "escalation": True, "priority": "urgent"}
                stages.append((n, now + rules.escalate_after, to, msg))
        # Keyed by the item's posting time too: an item id that retention freed and SQLite reused
        # is a different item.
        posted_us = round(item.created_at.timestamp() * 1e6)
        for stage, due_at, channels, msg in stages:
            for channel in channels:
                added += outbox.add(
                    c, key=f"{item_id}.{posted_us}:{channel}:{stage}", channel=channel,
                    item_id=item_id, goal_id=item.goal_id, stage=stage, message=msg,
                    due_at=due_at, now=now,
                )  # fmt: skip
    return added


def _quiet_until(c: Conn, agent: AgentConfig, goal_id: int, now: float) -> float:
    """`now` outside the goal's quiet hours, else when they end."""
    cad = cadence.cadence_from(agent.checkin, qc.cadence_row(c, goal_id))
    return cadence.leave_quiet(cad, now)


def claim_due(c: Conn, cfg: Config, now: float, limit: int = 50) -> list[Any]:
    """The rows to attempt now: reminders of closed items are cancelled first, and rows inside
    their goal's quiet hours are moved to the hours' end (no attempt counted). Reminders count
    from the first message: holding a message moves its item's later stages by as much (a first
    message held from 23:30 to 08:00 takes its 1 h reminder to 09:00, not to 08:00 beside it)."""
    outbox.cancel_closed(c)
    ready: list[Any] = []
    held: dict[int, int] = {}  # item → the stage held in this pass; its rows from there moved
    for row in outbox.due(c, now, limit):
        if row.item_id is not None and row.stage >= held.get(row.item_id, row.stage + 1):
            continue  # moved by its item's hold in this pass: no longer due
        agent = cfg.agents.get(str(row.message.get("agent")))
        if agent is not None and agent.notify.hold_in_quiet_hours and row.goal_id is not None:
            until = _quiet_until(c, agent, row.goal_id, now)
            if until > now:
                if row.attempts == 0 and row.item_id is not None:
                    outbox.hold_item(c, row.dedupe_key, row.stage, until)
                    held[row.item_id] = row.stage
                else:  # a retry: the schedule already counts from its first try
                    outbox.defer(c, row.outbox_id, until)
                continue
        ready.append(row)
    return ready


def retry_at(attempts: int, created_at: float, now: float, cfg: ChannelBase) -> float | None:
    """When to try again after `attempts` failures (doubling from retry_base_s up to retry_max_s),
    or None once the message is older than give_up_after_s."""
    if now - created_at >= cfg.give_up_after_s:
        return None
    return now + min(cfg.retry_base_s * 2.0 ** max(attempts - 1, 0), cfg.retry_max_s)
