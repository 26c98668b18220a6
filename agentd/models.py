"""Domain records: frozen dataclasses with StrEnum statuses, shared by every layer.

State changes by writing rows (see `agentd.db`), never by mutating these objects. Times are UTC-aware
datetimes here and REAL unix seconds in the database.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

JSON = dict[str, Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


def from_ts(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no whitespace — what digests and dedupe compare."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def action_digest(kind: str, args: JSON) -> str:
    """The identity an approval is bound to: the action kind plus its exact arguments."""
    return hashlib.sha256(canonical_json({"kind": kind, "args": args}).encode()).hexdigest()


class GoalStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    ACHIEVED = "achieved"
    ABANDONED = "abandoned"


class RunStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class WaitKind(StrEnum):
    """What a waiting run waits for; the daemon's waker matches each against committed rows."""

    INBOX = "inbox"  # an inbox item (question or approval) to be answered
    EVENT = "event"  # an event with a name (and fields) to arrive
    TIMER = "timer"  # a time to pass (sleep, retry backoff)


class StepKind(StrEnum):
    """One journaled transition of a run; the engine picks the next step from the last one."""

    START = "start"  # the run was created (trigger and reason)
    OBSERVE = "observe"  # sources read; world snapshot stored
    DECIDE = "decide"  # the model's reply, raw and parsed (or its validation error)
    CHECK = "check"  # the harness verdict for the decided action
    ACT = "act"  # an action's intent (status started) and then its result (status done)
    WAIT = "wait"  # the run suspended: for an inbox item, an event or a time
    WAKE = "wake"  # what woke the run (answer, approval, denial, event, timer)
    SUMMARIZE = "summarize"  # older history folded into a summary, so prompts stay bounded
    # The inner loop (build runs): requirements fixed, a draft made, a draft judged.
    PLAN = "plan"  # requirements (explicit, extracted, configured) and a clarifying question
    GENERATE = "generate"  # a version of the artifact (stored in `artifacts`), or an invalid reply
    JUDGE = "judge"  # the verdict on a version: deterministic checks, then the model judge
    FINISH = "finish"  # the run ended (succeeded / failed / cancelled), with a summary


class StepStatus(StrEnum):
    STARTED = "started"  # intent journaled, outcome not yet known
    DONE = "done"
    ERROR = "error"


class Verdict(StrEnum):
    ALLOW = "allow"
    APPROVE = "approve"
    DENY = "deny"


class InboxKind(StrEnum):
    QUESTION = "question"
    APPROVAL = "approval"
    NOTICE = "notice"


class InboxStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"  # a question with an answer
    APPROVED = "approved"  # an approval granted, not yet consumed
    CONSUMED = "consumed"  # an approval used by exactly one execution
    DENIED = "denied"
    EXPIRED = "expired"  # closed by policy (`on_expire = deny`) or withdrawn, with a reason
    DISMISSED = "dismissed"  # a notice read and put away


@dataclass(frozen=True)
class Goal:
    goal_id: int
    title: str
    why: str
    agent: str
    status: GoalStatus
    criteria: list[str]
    deadline: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Run:
    run_id: int
    goal_id: int
    agent: str
    status: RunStatus
    trigger: str
    step_count: int
    wait: JSON | None
    next_wake_at: datetime | None
    summary: str | None
    created_at: datetime
    updated_at: datetime
    lease_owner: str | None = None
    lease_epoch: int = 0


@dataclass(frozen=True)
class Step:
    run_id: int
    seq: int
    kind: StepKind
    status: StepStatus
    data: JSON
    created_at: datetime
    completed_at: datetime | None
    action: str | None = None
    args: JSON | None = None
    digest: str | None = None
    verdict: Verdict | None = None
    result: JSON | None = None
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.seq}"


@dataclass(frozen=True)
class InboxItem:
    item_id: int
    kind: InboxKind
    status: InboxStatus
    goal_id: int | None
    run_id: int | None
    title: str
    body: str
    action: str | None
    args: JSON | None
    digest: str | None
    rule: str | None
    answer: str | None
    created_at: datetime
    expires_at: datetime | None
    resolved_at: datetime | None
    data: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    event_id: int
    name: str
    data: JSON
    dedupe_key: str | None
    created_at: datetime
    source: str = "cli"  # who recorded it: cli, poll, hook:NAME (an inbound webhook)
