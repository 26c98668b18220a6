"""What to send, where and when: new inbox items become outbox rows (first message, reminders,
escalation) per the agent's `[agents.X.notify]`; due rows are held back in the goal's quiet hours
(the check-in cadence's own logic) unless urgent — an approval, a failure or a question a run waits on pages
at once on a channel with `urgent_in_quiet_hours = "send"` (the default) — and never past their
item's expiry; held rows follow a changed setting at once; rows are dropped once their item is
answered or closed. Runs inside the daemon's transactions; `now` is the daemon's clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from typing import Any

from agentd.config import Config
from agentd.config.notify import ChannelBase
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.conn import Conn
from agentd.db.outbox import OutboxRow
from agentd.errors import NotFound
from agentd.models import JSON, InboxItem, InboxKind, RunStatus
from agentd.notify.content import about
from agentd.operator import evidence as item_evidence
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


def message_for(
    cfg: Config,
    item: InboxItem,
    what: str,
    agent: str,
    goal_title: str,
    evidence: JSON | None = None,
) -> JSON:
    """What every channel renders: what agentd/notify/content.py lets out about the item (never an
    approval's arguments or world), no token, nothing that approves."""
    title, body = about(item, what, evidence)
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
    a bulk import) must not keep the daemon planning nothing, batch after batch.

    One daemon plans at a time (the "notify_queue" singleton, taken first): with several daemons
    on one database, two would read the same queue and plan its items each at its own `now`."""
    c.dialect.singleton(c, "notify_queue")
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
        summary = item_evidence.for_item(c, item) if what in ("approval", "question") else None
        base = message_for(cfg, item, what, agent, goal_title, summary)
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


def urgent(message: JSON) -> bool:
    """An approval, a failure (a run gave up: the service it watched may still be down), or a
    question a run waits on (a check-in's question has no run: it waits)."""
    what = message.get("category")
    return what in ("approval", "failure") or (
        what == "question" and message.get("run_id") is not None
    )


@dataclass(frozen=True)
class Hold:
    until: float  # when the quiet hours end
    tz: str  # their IANA zone


class Holds:
    """Whether quiet hours hold a message at `now`, per the config in force; goals' cadences are
    read once per pass."""

    def __init__(self, c: Conn, cfg: Config, now: float) -> None:
        self.c, self.cfg, self.now = c, cfg, now
        self._cadences: dict[int, cadence.Cadence] = {}

    def of(self, row: OutboxRow, expires_at: float | None) -> Hold | None:
        """None: send it now (no quiet hours now, urgent on a channel that sends, or held it would
        arrive after its item expires)."""
        agent = self.cfg.agents.get(str(row.message.get("agent")))
        if agent is None or not agent.notify.hold_in_quiet_hours or row.goal_id is None:
            return None
        channel = self.cfg.notify.get(row.channel)
        if urgent(row.message) and (channel is None or channel.urgent_in_quiet_hours == "send"):
            return None
        cad = self._cadences.get(row.goal_id)
        if cad is None:
            cad = cadence.cadence_from(agent.checkin, qc.cadence_row(self.c, row.goal_id))
            self._cadences[row.goal_id] = cad
        until = cadence.leave_quiet(cad, self.now)
        if until <= self.now or (expires_at is not None and until >= expires_at):
            return None  # a page held past its item's expiry is no page: it goes now
        return Hold(until, cad.tz)


def _expires_at(c: Conn, item_id: int | None) -> float | None:
    try:
        item = None if item_id is None else qi.get_item(c, item_id)
    except NotFound:
        return None
    return None if item is None or item.expires_at is None else item.expires_at.timestamp()


def claim_due(c: Conn, cfg: Config, now: float, owner: str, limit: int = 50) -> list[Any]:
    """The rows to attempt now, claimed by `owner` (outbox.claim: no other daemon attempts them
    until it records the outcome, or its claim lapses): reminders of closed items are cancelled
    first, and rows quiet hours hold are moved to the hours' end (no attempt counted). Reminders
    count from the first message: holding a message moves its item's later stages on that
    channel by as much (a first message held from 23:30 to 08:00 takes its 1 h reminder to
    09:00, not to 08:00 beside it)."""
    outbox.cancel_closed(c)
    ready: list[Any] = []
    holds = Holds(c, cfg, now)
    held: dict[tuple[int | None, str], int] = {}  # (item, channel) → the stage held this pass
    for row in outbox.due(c, now, limit, owner):
        since = held.get((row.item_id, row.channel))
        if since is not None and row.stage >= since:
            continue  # moved by its item's hold in this pass: no longer due
        hold = holds.of(row, None)
        if hold is not None:  # the item's expiry read only when it matters
            hold = holds.of(row, _expires_at(c, row.item_id))
        if hold is None:
            ready.append(row)
            continue
        # A retry is moved alone: the schedule already counts from its first try.
        first = row.attempts == 0 and row.item_id is not None
        outbox.move(c, row, hold.until, hold.tz, later=first, now=now)
        if first:
            held[(row.item_id, row.channel)] = row.stage
    outbox.claim(c, [row.outbox_id for row in ready], owner)
    return ready


@dataclass(frozen=True)
class Move:
    row: OutboxRow
    until: float
    tz: str | None  # None: released, to go now


def review_held(c: Conn, cfg: Config, now: float) -> list[Move]:
    """What a changed setting (the goal's quiet hours, the channel's urgent_in_quiet_hours, an
    item's expiry, a reload) does to held messages: each released now or held to a new end.
    Read only; `apply_moves` writes it."""
    holds = Holds(c, cfg, now)
    moves = []
    for row, expires_at in outbox.held(c):
        if row.next_attempt_at <= now:
            continue  # due: the next claim decides
        hold = holds.of(row, expires_at)
        if hold is None:
            moves.append(Move(row, now, None))
        elif abs(hold.until - row.next_attempt_at) >= 1.0 or hold.tz != row.held_tz:
            moves.append(Move(row, hold.until, hold.tz))
    return moves


def apply_moves(c: Conn, moves: list[Move], now: float) -> int:
    """Write `review_held`'s moves; a row changed since (sent, retried) is left as it is."""
    done = 0
    for m in sorted(moves, key=lambda m: m.row.outbox_id):
        first = m.row.attempts == 0 and m.row.item_id is not None
        done += outbox.move(c, m.row, m.until, m.tz, later=first, now=now)
    return done


def retry_at(attempts: int, created_at: float, now: float, cfg: ChannelBase) -> float | None:
    """When to try again after `attempts` failures (doubling from retry_base_s up to retry_max_s),
    or None once the message is older than give_up_after_s."""
    if now - created_at >= cfg.give_up_after_s:
        return None
    return now + min(cfg.retry_base_s * 2.0 ** max(attempts - 1, 0), cfg.retry_max_s)
