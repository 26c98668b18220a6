"""The goal-context document and the other resources agentd serves over MCP, read from the home's
database as plain JSON: what a goal is for, where it stands and what comes next.

The shapes are pydantic models so the document has a JSON schema (`GoalContext.model_json_schema()`,
served at `agentd://schema/goal-context`, documented in docs/mcp.md). Runs carry both agentd's status
and `task_status`, the name MCP's tasks extension uses (`working`, `input_required`, `completed`,
`failed`, `cancelled`), so a client that understands tasks understands runs. No document holds the
current time: the same rows always give the same bytes, which is how the server tells a change.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentd.config import Config
from agentd.errors import NotFound
from agentd.models import JSON, Goal, InboxItem, Run, RunStatus, WaitKind, from_ts
from agentd.operator import goals, inbox, runs
from agentd.operator import schedules as plan
from agentd.operator.home import HomeStore
from agentd.text import jsonable
from agentd.views import runs as render_runs

SCHEMA_ID = "agentd.goal-context/1"
RECENT_RUNS = 10  # outcomes a goal's document carries; `agentd://goals/{id}/runs` has more
RUNS_LISTED = 100
ARTIFACTS_LISTED = 20
ITEM_BODY_CHARS = 2000  # an inbox item's body in a document (the item itself has all of it)

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


def task_status(run: Run) -> TaskStatus:
    """A run's status as MCP's tasks extension names it: a run waiting on an inbox item (a
    question, an approval) needs input; one waiting on a timer or an event is still working."""
    if run.status == RunStatus.WAITING:
        wait = run.wait or {}
        return "input_required" if wait.get("kind") == WaitKind.INBOX else "working"
    return {
        RunStatus.RUNNING: "working",
        RunStatus.SUCCEEDED: "completed",
        RunStatus.FAILED: "failed",
        RunStatus.CANCELLED: "cancelled",
    }[run.status]  # type: ignore[return-value]


def goal_uri(goal_id: int) -> str:
    return f"agentd://goals/{goal_id}"


def run_uri(run_id: int) -> str:
    return f"agentd://runs/{run_id}"


# ── the document ──────────────────────────────────────────────────────────────────────────────


class MemoryEntry(BaseModel):
    kind: str = Field(description="answer, known, accepted, dismissed, outcome, verdict, earlier…")
    text: str
    source: str | None = Field(description="what wrote it: inbox:ID, run:ID, mcp, fold…")
    at: datetime | None


class RunOutcome(BaseModel):
    run_id: int
    uri: str = Field(description="agentd://runs/{run_id}: the run's timeline")
    status: str = Field(
        description="agentd's status: running, waiting, succeeded, failed, cancelled"
    )
    task_status: TaskStatus = Field(description="the same, in MCP tasks' vocabulary")
    trigger: str
    summary: str | None
    waiting_for: JSON | None = Field(description="what a waiting run waits for (kind, item…)")
    step_count: int
    created_at: datetime
    updated_at: datetime


class InboxEntry(BaseModel):
    item_id: int
    kind: str = Field(description="question, approval or notice")
    rule: str | None = Field(description="nudge, clarify, achieved, policy: …")
    title: str
    body: str
    goal_id: int | None
    run_id: int | None
    action: str | None = Field(description="an approval's exact action")
    args: JSON | None = Field(description="and its exact arguments")
    created_at: datetime
    expires_at: datetime | None


class NextCheckin(BaseModel):
    enabled: bool = Field(description="whether the goal's agent checks in on its own")
    at: datetime | None = Field(description="when the goal looks again")
    why: str | None = Field(description="why then (cadence, deadline, schedule, snooze…)")
    by: str | None = Field(
        None, description='what looks then: "cadence", "schedule N" or "check-in N"'
    )
    snoozed_until: datetime | None
    backoff: int = Field(description="steps the cadence backed off after ignored nudges")
    every_s: float | None = Field(description="the cadence in force, in seconds")


class ArtifactEntry(BaseModel):
    artifact: int = Field(description="the build run's id; agentd://artifacts/{artifact}")
    uri: str
    request: str
    versions: int
    status: str = Field(description="the latest version's verdict: passed, failed, none…")
    run_status: str


class Spend(BaseModel):
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float = 0.0


class GoalContext(BaseModel):
    """Where a goal stands: what it is for, what it knows, what happened, what waits, what next."""

    schema_id: Literal["agentd.goal-context/1"] = Field("agentd.goal-context/1", alias="schema")
    goal_id: int
    uri: str
    title: str
    why: str
    success_criteria: list[str]
    deadline: datetime | None
    status: str = Field(description="active, paused, achieved or abandoned")
    agent: str
    created_at: datetime
    updated_at: datetime
    memory: list[MemoryEntry] = Field(description="what the goal knows, oldest first (bounded)")
    recent_outcomes: list[RunOutcome] = Field(description="its latest runs, newest first")
    open_inbox: list[InboxEntry] = Field(description="what waits for the person")
    next_checkin: NextCheckin
    artifacts: list[ArtifactEntry]
    spend: Spend = Field(description="model tokens and cost of its runs so far")

    model_config = {"populate_by_name": True}


class GoalSummary(BaseModel):
    goal_id: int
    uri: str
    title: str
    status: str
    deadline: datetime | None
    active_run: RunOutcome | None = Field(description="its run in progress, if any")


# ── readers (through agentd/operator/, one read transaction each) ─────────────────────────────


def _outcome(run: Run) -> RunOutcome:
    return RunOutcome(
        run_id=run.run_id, uri=run_uri(run.run_id), status=str(run.status),
        task_status=task_status(run), trigger=run.trigger, summary=run.summary,
        waiting_for=jsonable(run).get("wait"), step_count=run.step_count,
        created_at=run.created_at, updated_at=run.updated_at,
    )  # fmt: skip


def _entry(item: InboxItem) -> InboxEntry:
    return InboxEntry(
        item_id=item.item_id, kind=str(item.kind), rule=item.rule, title=item.title,
        body=item.body[:ITEM_BODY_CHARS], goal_id=item.goal_id, run_id=item.run_id,
        action=item.action, args=item.args, created_at=item.created_at, expires_at=item.expires_at,
    )  # fmt: skip


def goal_context(store: HomeStore, cfg: Config, goal_id: int) -> GoalContext:
    """The goal-context document: the goal, and what `agentd goal show` says about it."""
    out = plan.outlook(store, cfg, goal_id)  # NotFound names `agentd goal list`
    snap = goals.snapshot(store, goal_id, runs=RECENT_RUNS, artifacts=ARTIFACTS_LISTED)
    return _context(snap, out)


def _context(snap: goals.Snapshot, out: JSON) -> GoalContext:
    goal, spend = snap.goal, snap.spend
    goal_id = goal.goal_id
    return GoalContext(
        goal_id=goal.goal_id, uri=goal_uri(goal_id), title=goal.title, why=goal.why,
        success_criteria=goal.criteria, deadline=goal.deadline, status=str(goal.status),
        agent=goal.agent, created_at=goal.created_at, updated_at=goal.updated_at,
        memory=[MemoryEntry(kind=m["kind"], text=m["text"], source=m["source"],
                            at=from_ts(m["at"])) for m in out["memory"]],
        recent_outcomes=[_outcome(r) for r in snap.runs],
        open_inbox=[_entry(i) for i in snap.open_items],
        next_checkin=NextCheckin(
            enabled=out["enabled"], at=from_ts(out["next_at"]), why=out["next_why"],
            by=out["next_by"],
            snoozed_until=from_ts(out["snoozed_until"]), backoff=out["backoff"],
            every_s=(out.get("cadence") or {}).get("every_s"),
        ),
        artifacts=[_artifact(a) for a in snap.artifacts],
        spend=Spend(tokens_in=int(spend.get("tokens_in") or 0),
                    tokens_out=int(spend.get("tokens_out") or 0),
                    usd=float(spend.get("usd") or 0.0)),
    )  # fmt: skip


def _artifact(a: JSON) -> ArtifactEntry:
    return ArtifactEntry(
        artifact=a["artifact"], uri=f"agentd://artifacts/{a['artifact']}", request=a["request"],
        versions=a["versions"], status=a["status"], run_status=a["run_status"],
    )  # fmt: skip


def goal_list(store: HomeStore) -> list[GoalSummary]:
    return [
        _summary(goal, None if active is None else _outcome(active))
        for goal, active in goals.with_active_runs(store)
    ]


def _summary(goal: Goal, active: RunOutcome | None) -> GoalSummary:
    return GoalSummary(
        goal_id=goal.goal_id, uri=goal_uri(goal.goal_id), title=goal.title,
        status=str(goal.status), deadline=goal.deadline, active_run=active,
    )  # fmt: skip


def goal_runs(store: HomeStore, goal_id: int) -> list[RunOutcome]:
    return [_outcome(r) for r in goals.runs_of(store, goal_id, RUNS_LISTED)]


def open_inbox(store: HomeStore) -> list[InboxEntry]:
    return [_entry(i) for i in inbox.items(store)]


def run_timeline(store: HomeStore, run_id: int) -> JSON:
    """`runs show --json` (the run, its goal, spend, every step), plus `task_status`."""
    run, goal, steps = goals.run_details(store, run_id)
    shown = jsonable(render_runs.show_json(run, goal, steps))
    return {**shown, "task_status": task_status(run)}


def artifact(store: HomeStore, artifact_id: int) -> JSON:
    """A build's versions, each with its text and the judge's verdict (newest last)."""
    run, versions = runs.build_versions(store, artifact_id)
    if versions is None:
        raise NotFound(f"run {artifact_id} is not a build; agentd://goals/{{id}} lists artifacts")
    return dict(jsonable(
        {"artifact": artifact_id, "goal_id": run.goal_id, "run_status": str(run.status),
         "task_status": task_status(run), "versions": versions}
    ))  # fmt: skip


def dump(value: BaseModel | list[Any] | JSON) -> str:
    """JSON text of a document: aliases (`schema`), ISO 8601 times, sorted keys (stable bytes)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    elif isinstance(value, list):
        value = [v.model_dump(mode="json", by_alias=True) if isinstance(v, BaseModel) else v
                 for v in value]  # fmt: skip
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=1)
