"""The operator's operations on goals and runs: add, move and close goals, start and cancel runs,
tell a goal something (its memory), make it check in now; and what surfaces read of goals.

Each is one short transaction, like the inbox's (agentd/operator/inbox.py): closing a goal cancels its active
runs in the same transaction, and cancelling a run withdraws its open questions and approvals. The
daemon notices within a second, or at its next start if it is stopped.

A goal's title, why and criteria go into every prompt of its runs and check-ins, so they are bounded
here, for every surface: not blank, at most TITLE_MAX_CHARS / WHY_MAX_CHARS / CRITERION_MAX_CHARS
characters, valid Unicode. Asking for a state that already holds (pausing a paused goal) raises
`Unchanged`, which the command line reports as a note with exit 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentd.db import accounting, memory
from agentd.db import artifacts as qa
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import Refused, Unchanged, UsageError, require_utf8
from agentd.models import JSON, Goal, GoalStatus, InboxItem, Run, RunStatus, Step
from agentd.operator import inbox, schedules
from agentd.operator.parse import parse_when
from agentd.text import jsonable

if TYPE_CHECKING:
    from agentd.config import Config

ALL_RUNS = 1_000_000
TITLE_MAX_CHARS = 300  # a line; a 120,000-character title once cost 30,826 tokens per decision
WHY_MAX_CHARS = 2000  # a paragraph
CRITERION_MAX_CHARS = 300
MAX_CRITERIA = 20


def check_text(what: str, value: str, max_chars: int, example: str) -> str:
    """`value` without surrounding whitespace, or a UsageError naming `what` and the limit."""
    text = value.strip()
    require_utf8(what, text, "the terminal's locale (LANG) or the file it came from")
    if not text:
        raise UsageError(f"{what} is empty; {example}")
    if len(text) > max_chars:
        raise UsageError(
            f"{what} is {len(text):,} characters; at most {max_chars:,} fit (it goes into every "
            f"prompt); {example}"
        )
    return text


def parse_deadline(value: str, now: datetime, option: str = "--deadline") -> datetime:
    """A deadline: ISO 8601 (a date or time without a zone is read in the local zone) or a delay
    from `now` (90m, 12h, 3d, 2w). One in the past is refused: it could never be met. Errors
    name it `option`, as the user wrote it (a flag, or a key of `goal add --from`'s lines)."""
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        when = parse_when(value, now, option)  # a delay, or a usage error with examples
    try:  # no zone: the local one (TZ, else the system's), as the person typing means it
        when = when.astimezone(UTC)
    except (OverflowError, OSError, ValueError):
        raise UsageError(f"{option} {value.strip()!r} is out of range") from None
    if when <= now:
        raise UsageError(
            f"{option} {value.strip()!r} is in the past ({when:%Y-%m-%d %H:%M} UTC); give a "
            "future time (a time without a zone is local) or a delay like 3d"
        )
    return when


def shared_triggers(store: SyncStore, triggers: Sequence[str], agent: str) -> str | None:
    """A warning when other active goals of `agent` already answer its triggers: each goal gets
    its own run on every trigger (two remediation runs for one outage), or None."""
    if not triggers:
        return None
    others = [
        g for g in store.read(lambda c: q.list_goals(c, GoalStatus.ACTIVE)) if g.agent == agent
    ]
    if not others:
        return None
    ids = ", ".join(str(g.goal_id) for g in others)
    many = len(others) > 1
    return (
        f"agent {agent} already serves active goal{'s' if many else ''} {ids} on its triggers "
        f"({', '.join(triggers)}): {f'all {len(others) + 1}' if many else 'both'} goals will run "
        "on every trigger (one run each); pass --agent to choose another agent, or close "
        f"{'another' if many else 'the other'} goal with `agentd goal close ID`"
    )


def add(
    store: SyncStore,
    *,
    title: str,
    why: str,
    agent: str,
    criteria: list[str],
    deadline: datetime | None = None,
) -> Goal:
    (goal,) = add_many(store, [checked(title, why, agent, criteria, deadline)])
    return goal


@dataclass(frozen=True)
class NewGoal:
    """A goal checked and ready to store (`checked`)."""

    title: str
    why: str
    agent: str
    criteria: list[str]
    deadline: float | None


def add_many(store: SyncStore, new: Sequence[NewGoal]) -> list[Goal]:
    """Store checked goals in one transaction: all of them, or none."""

    def work(c: Any) -> list[Goal]:
        ids = [
            q.add_goal(c, title=g.title, why=g.why, agent=g.agent, criteria=g.criteria,
                       deadline=g.deadline)
            for g in new
        ]  # fmt: skip
        return [q.get_goal(c, goal_id) for goal_id in ids]

    return store.write(work)


def checked(
    title: str, why: str, agent: str, criteria: list[str], deadline: datetime | None = None
) -> NewGoal:
    """A new goal's text, checked as every surface checks it (UsageError says what to fix)."""
    when = deadline.timestamp() if deadline is not None else None
    title = check_text(
        "the title",
        title,
        TITLE_MAX_CHARS,
        'say what you want done in a line, e.g. "Keep checkout healthy"',
    )
    if any(ch in title for ch in "\r\n") or not title.isprintable():
        raise UsageError(
            "the title is one line of text (no line breaks or control characters); "
            "put the rest in --why"
        )
    why = check_text(
        "--why", why, WHY_MAX_CHARS, 'say why it matters, e.g. --why "5xx loses orders"'
    )
    if len(criteria) > MAX_CRITERIA:
        raise UsageError(f"{len(criteria)} criteria; at most {MAX_CRITERIA} fit in a goal")
    example = 'e.g. --criterion "p95 latency under 300 ms"'
    criteria = [check_text("--criterion", text, CRITERION_MAX_CHARS, example) for text in criteria]
    return NewGoal(title, why, agent, criteria, when)


def details(store: SyncStore, goal_id: int) -> tuple[Goal, list[Run], dict[str, int]]:
    """A goal, all its runs (newest first) and the model tokens they spent."""

    def read(c: Any) -> tuple[Goal, list[Run], dict[str, int]]:
        goal = q.get_goal(c, goal_id)
        runs = q.list_runs(c, goal_id=goal_id, limit=ALL_RUNS)
        return goal, runs, accounting.goal_spend(c, goal_id)

    return store.read(read)


def run_details(store: SyncStore, run_id: int) -> tuple[Run, Goal, list[Step]]:
    """A run, its goal and its journal (for `agentd runs show`)."""

    def read(c: Any) -> tuple[Run, Goal, list[Step]]:
        run = q.get_run(c, run_id)
        return run, q.get_goal(c, run.goal_id), q.list_steps(c, run_id)

    return store.read(read)


def set_status(store: SyncStore, goal_id: int, status: GoalStatus) -> Goal:
    """Pause or resume a goal (closing goes through `close`, which also cancels runs)."""

    def work(c: Any) -> Goal:
        _unless_already(q.get_goal(c, goal_id), status)
        return q.set_goal_status(c, goal_id, status)

    return store.write(work)


def _unless_already(goal: Goal, status: GoalStatus) -> None:
    if goal.status == status:
        raise Unchanged(f"goal {goal.goal_id} is already {status}; nothing changed")
    if goal.status in (GoalStatus.ACHIEVED, GoalStatus.ABANDONED):
        raise Refused(
            f"goal {goal.goal_id} is closed ({goal.status}); a closed goal stays closed — add a "
            "new goal with `agentd goal add` to pursue it again"
        )


def close(store: SyncStore, goal_id: int, status: GoalStatus) -> list[int]:
    """Close a goal as achieved or abandoned and cancel its active runs; returns their ids."""
    reason = f"goal {goal_id} closed as {status} by the operator"

    def work(c: Any) -> list[int]:
        _unless_already(q.get_goal(c, goal_id), status)
        q.set_goal_status(c, goal_id, status)
        runs = q.list_runs(c, goal_id=goal_id, limit=ALL_RUNS)
        active = [r.run_id for r in runs if not r.status.finished]
        for run_id in active:
            _cancel(c, run_id, reason)
        return active

    return store.write(work)


def start_run(store: SyncStore, goal_id: int) -> Run:
    """A new run of an active goal that has none running or waiting; the daemon picks it up."""

    def work(c: Any) -> Run:
        goal = q.get_goal(c, goal_id)
        if goal.status == GoalStatus.PAUSED:
            raise Refused(f"goal {goal_id} is paused; `agentd goal resume {goal_id}` first")
        if goal.status != GoalStatus.ACTIVE:
            raise Refused(f"goal {goal_id} is {goal.status}; it takes no more runs")
        if (active := q.active_run_of_goal(c, goal_id)) is not None:
            raise Refused(
                f"goal {goal_id} already has run {active}; see `agentd runs show {active}`"
            )
        run_id = q.create_run(c, goal_id=goal_id, agent=goal.agent, trigger="operator")
        return q.get_run(c, run_id)

    return store.write(work)


def cancel_run(store: SyncStore, run_id: int, reason: str) -> None:
    """Cancel a run; one already cancelled is a no-op (Unchanged), one that ended is refused."""

    def work(c: Any) -> None:
        run = q.get_run(c, run_id)
        if run.status == RunStatus.CANCELLED:
            raise Unchanged(f"run {run_id} is already cancelled; nothing changed")
        if run.status.finished:
            raise Refused(f"run {run_id} already ended ({run.status}); there is nothing to cancel")
        _cancel(c, run_id, reason)

    store.write(work)


def _cancel(c: Any, run_id: int, reason: str) -> None:
    """Cancel a run and withdraw its open questions/approvals, which no one could use any more."""
    q.cancel(c, run_id, reason)
    qi.withdraw_open_items(c, run_id, reason)


# ── what surfaces read of goals; a goal's memory; a check-in now ────────────────────────────────


def all_goals(store: SyncStore) -> list[Goal]:
    """Every goal, whatever its status."""
    return store.read(lambda c: q.list_goals(c, None))


def with_active_runs(store: SyncStore) -> list[tuple[Goal, Run | None]]:
    """Every goal with its run in progress (running or waiting), if any."""

    def read(c: Any) -> list[tuple[Goal, Run | None]]:
        out: list[tuple[Goal, Run | None]] = []
        for goal in q.list_goals(c):
            active = q.active_run_of_goal(c, goal.goal_id)
            out.append((goal, None if active is None else q.get_run(c, active)))
        return out

    return store.read(read)


def runs_of(store: SyncStore, goal_id: int, limit: int) -> list[Run]:
    """A goal's latest runs, newest first (NotFound when there is no such goal)."""

    def read(c: Any) -> list[Run]:
        q.get_goal(c, goal_id)
        return q.list_runs(c, goal_id=goal_id, limit=limit)

    return store.read(read)


@dataclass(frozen=True)
class Snapshot:
    """A goal and what surrounds it, read in one transaction: its latest runs (newest first),
    its open inbox items, its spend, and its builds (newest first, each with its latest version)."""

    goal: Goal
    runs: list[Run]
    open_items: list[InboxItem]
    spend: JSON
    artifacts: list[JSON]


def snapshot(store: SyncStore, goal_id: int, *, runs: int, artifacts: int) -> Snapshot:
    """A goal's Snapshot with at most `runs` runs and `artifacts` builds."""

    def read(c: Any) -> Snapshot:
        goal = q.get_goal(c, goal_id)
        recent = q.list_runs(c, goal_id=goal_id, limit=runs)
        items = [i for i in qi.list_items(c, status="open") if i.goal_id == goal_id]
        spend = accounting.goal_spend(c, goal_id)
        return Snapshot(goal, recent, items, spend, qa.list_artifacts(c, goal_id, artifacts))

    return store.read(read)


def add_context(store: SyncStore, goal_id: int, text: str, source: str) -> int:
    """Tell an open goal something it should know from now on: a `known` entry of its memory
    (which every check-in and run of it reads), as the operator's word; returns the entry's id."""
    said = inbox.check_text("the context", text, required=True)
    now = schedules.home_now(store)

    def write(c: Any) -> int:
        goal = q.get_goal(c, goal_id)
        if goal.status in (GoalStatus.ACHIEVED, GoalStatus.ABANDONED):
            raise Refused(f"goal {goal_id} is closed ({goal.status}); it takes no context")
        return memory.remember(c, goal_id, "known", said, source, now)

    return store.write(write)


def check_in_now(store: SyncStore, cfg: Config, goal_id: int) -> JSON:
    """Make an active goal whose agent checks in look now rather than at its next planned look
    (a running daemon picks it up within a second); a check-in already due now is Unchanged."""
    now = schedules.home_now(store)

    def work(c: Any) -> JSON:
        goal = q.get_goal(c, goal_id)
        if goal.status != GoalStatus.ACTIVE:
            raise Refused(f"goal {goal_id} is {goal.status}; only an active goal checks in")
        agent = cfg.agents.get(goal.agent)
        if agent is None or not agent.checkin.enabled:
            raise Refused(
                f"goal {goal_id}'s agent {goal.agent!r} has check-ins off "
                f"([agents.{goal.agent}.checkin] enabled = false in config.toml)"
            )
        checkin_id = qc.add_due(c, goal_id, now, now)
        if checkin_id is None:
            raise Unchanged(f"goal {goal_id} already has a check-in due now; nothing changed")
        return {"goal_id": goal_id, "checkin_id": checkin_id, "due_at": jsonable(
            datetime.fromtimestamp(now, UTC))}  # fmt: skip

    return store.write(work)


def get_goal(store: SyncStore, goal_id: int) -> Goal:
    """One goal (NotFound names `agentd goal list`)."""
    return store.read(lambda c: q.get_goal(c, goal_id))


def list_goals(store: SyncStore, status: str | None = None) -> list[Goal]:
    """The goals, oldest first; only those with `status` when it is given."""
    return store.read(lambda c: q.list_goals(c, status))
