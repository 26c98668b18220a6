"""One check-in of a goal, journaled and resumable: precheck → (model) → effect.

The `checkins` row is the state machine, each move one transaction:

    due ──precheck──► skipped                       (nothing moved, budget spent, goal closed)
     └──────────────► deciding ──reply journaled──► decided ──effect + memory + next look──► done
                        ▲   │ model error: back to due with a durable retry time   │ invalid once:
                        │   └─ gave up after MAX_MODEL_ATTEMPTS → failed            │ re-asked with
                        └──────────────────────────────────────────────────────────┘ the error; twice:
                                                                                      failed
The raw reply is journaled *before* it is parsed, and the effect (a nudge, a question, a run, the
achieved-confirmation) is applied in the same transaction that marks the row done, so a crash at
any instant never repeats a journaled model call nor an effect. Every ending schedules the goal's
next look through `cadence.next_look` (the model only proposes; the cadence decides).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from agentd.config import AgentConfig, call_timeout_s
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import leases, notices
from agentd.db import memory as mem
from agentd.db import queries as q
from agentd.db.checkins import Checkin, CheckinStatus
from agentd.errors import ModelError, ModelOutputInvalid, ModelRejected, Refused
from agentd.harness.menu import MAX_REPLY_CHARS
from agentd.llm import ModelReply
from agentd.models import JSON, Goal, GoalStatus, InboxKind
from agentd.outer import cadence, checkin_facts, checkin_prompt, schedule, verdicts
from agentd.outer.checkin_prompt import Reply
from agentd.runs.deps import Deps

log = structlog.get_logger("agentd.outer")
Launch = Callable[[int, int], None]
T = TypeVar("T")

MAX_MODEL_ATTEMPTS = 6  # failed calls of one check-in before it ends failed (next look as usual)
MAX_REASKS = 1  # an invalid reply is re-asked once with the error


async def run_checkin(deps: Deps, checkin_id: int, launch: Launch) -> None:
    """Take check-in `checkin_id` from wherever its row stands to an end, or to a point where
    it must wait (a model backoff, an earlier check-in of the same goal still open).

    Only under the row's claim (db/checkins.py): taken or renewed first — another daemon's
    live claim means it runs this check-in, and nothing is done here —, renewed by every write
    (a claim lost meanwhile refuses the write), and let go at the end."""
    try:
        await deps.store.write(lambda c: qc.hold(c, checkin_id, deps.owner))
    except qc.Claimed as e:
        log.info("checkin.claimed_elsewhere", checkin_id=checkin_id, why=str(e))
        return
    try:
        await _run(deps, checkin_id, launch)
    except qc.Claimed as e:  # our claim lapsed and another daemon took it: its row now
        log.warning("checkin.claim_lost", checkin_id=checkin_id, why=str(e))
        return
    finally:  # ended or waiting: any daemon may take it next (a failure here lapses by itself)
        with contextlib.suppress(Exception):
            await deps.store.write(lambda c: qc.release(c, checkin_id, deps.owner))


async def _run(deps: Deps, checkin_id: int, launch: Launch) -> None:
    moved = False  # this daemon moved the row on: its end is counted (agentd_checkins_total)
    for _ in range(2 * (MAX_REASKS + 2)):  # each pass moves the row on or returns
        row = await deps.store.read(lambda c: qc.get(c, checkin_id))
        if row.status not in qc.OPEN:
            if moved:
                deps.meter.checkin(str(row.status))
            return
        moved = True
        try:
            if row.status == CheckinStatus.DUE:
                go = await _precheck(deps, row)
            elif row.status == CheckinStatus.DECIDING:
                go = await _ask(deps, row)
            else:
                go = await _settle(deps, row, launch)
        except qc.Claimed:
            raise
        except Refused as e:  # another worker moved it meanwhile: read it again
            log.info("checkin.moved", checkin_id=checkin_id, why=str(e))
            continue
        if not go:  # ended, or waiting (a model backoff, a run): counted once it ended
            row = await deps.store.read(lambda c: qc.get(c, checkin_id))
            if row.status not in qc.OPEN:
                deps.meter.checkin(str(row.status))
            return


def _write(deps: Deps, checkin_id: int, work: Callable[[Any], T]) -> Awaitable[T]:
    """One write of the check-in, under its claim: renewed first, in the same transaction, or
    the write is refused (qc.Claimed) when another daemon took the row over."""

    def held(c: Any) -> T:
        qc.hold(c, checkin_id, deps.owner)
        return work(c)

    return deps.store.write(held)


# ── due → skipped | deciding ──────────────────────────────────────────────────────────────────────


async def _precheck(deps: Deps, row: Checkin) -> bool:
    now = deps.clock.now()
    if float(row.precheck.get("retry_at", 0)) > now:
        return False  # waiting out a model backoff
    outcome = await _write(
        deps, row.checkin_id, lambda c: _precheck_tx(c, deps, row.checkin_id, now)
    )
    log.info("checkin.prechecked", checkin_id=row.checkin_id, goal_id=row.goal_id, outcome=outcome)
    return bool(outcome == "deciding")


def _precheck_tx(c: Any, deps: Deps, checkin_id: int, now: float) -> str:
    row = qc.get(c, checkin_id)
    if row.status != CheckinStatus.DUE:
        return str(row.status)
    if qc.older_open(c, row.goal_id, checkin_id) is not None:
        return "after an earlier check-in"  # a goal's check-ins go one at a time, in order
    goal = q.get_goal(c, row.goal_id)
    agent = deps.config.agents.get(goal.agent)
    kept: JSON = {k: row.precheck[k] for k in ("attempts", "error") if k in row.precheck}
    if agent is None:
        qc.advance(c, checkin_id, "due", status="skipped", precheck=kept, completed_at=now,
                   reason=f"agent {goal.agent!r} is not in the config")  # fmt: skip
        return "skipped"
    if goal.status != GoalStatus.ACTIVE:
        _complete(c, deps, row, goal, agent, now, "skipped", kept, reason=f"goal is {goal.status}")
        return "skipped"
    snoozed = (qc.cadence_row(c, goal.goal_id) or {}).get("snoozed_until")
    if snoozed is not None and snoozed > now:  # recorded before the snooze: it waits no model
        _complete(c, deps, row, goal, agent, now, "skipped", kept, reason="goal snoozed")
        return "skipped"
    cad = cadence.cadence_from(agent.checkin, qc.cadence_row(c, goal.goal_id))
    if cadence.in_quiet(cad, row.due_at) and qc.newer_due(c, goal.goal_id, checkin_id):
        # Fires held back by quiet hours do not all run at their end: the newest one looks.
        _complete(c, deps, row, goal, agent, now, "skipped", kept,
                  reason="coalesced: fell due in quiet hours; a newer check-in looks")  # fmt: skip
        return "skipped"
    facts, pre, marks, moved = checkin_facts.gather(c, row, goal, agent, now)
    ignored = qc.ignored_nudges(c, goal.goal_id, checkin_id, now)
    base = {**kept, "reasons": pre.reasons, "stage": pre.stage, "ignored": ignored, "tz": cad.tz}
    if not pre.look:
        _complete(c, deps, row, goal, agent, now, "skipped", {**base, "marks": marks},
                  reason="nothing moved")  # fmt: skip
        return "skipped"
    if over := checkin_facts.over_budget(c, agent, goal.goal_id, now):
        _complete(c, deps, row, goal, agent, now, "skipped", base, reason=over)
        return "skipped"
    shown = {
        "since": facts.since, "lacking": facts.underspecified,
        "nudges": [{k: n[k] for k in ("item_id", "status", "topic", "answer")}
                   for n in qc.nudges(c, goal.goal_id, limit=8)],
        "open_questions": [item for rule in ("clarify", "achieved")
                           for item in qc.open_questions(c, goal.goal_id, rule)],
        **{k: moved[k] for k in ("runs_finished", "answers", "world_samples", "event_samples",
                                 "overdue_items")},
        "app_context": checkin_facts.app_context(c, deps, goal.agent, agent),
    }  # fmt: skip
    qc.advance(c, checkin_id, "due", status="deciding", precheck={
        **base, "marks": marks, "facts": shown, "asked": True, "must_ask": pre.must_ask,
        "n0": qc.model_calls(c, goal.goal_id, checkin_id), "invalid": [],
    })  # fmt: skip
    return "deciding"


# ── deciding → decided (or back to due after a model error) ─────────────────────────────────────


async def _ask(deps: Deps, row: Checkin) -> bool:
    now = deps.clock.now()
    goal, memory = await deps.store.read(
        lambda c: (q.get_goal(c, row.goal_id), mem.recall(c, row.goal_id))
    )
    agent = deps.config.agents.get(goal.agent)
    if agent is None:
        reason = f"agent {goal.agent!r} is not in the config"
        await _write(deps, row.checkin_id, lambda c: qc.advance(
            c, row.checkin_id, "deciding", status="failed", reason=reason, completed_at=now))  # fmt: skip
        return False
    p = row.precheck
    invalid = p.get("invalid", [])
    name = (agent.escalation_model if invalid else None) or agent.checkin.model or agent.model
    request = checkin_facts.request(deps, row, goal, agent, memory, now)
    try:
        async with asyncio.timeout(call_timeout_s(deps.config.models.get(name))):
            reply = await deps.complete(name, request)
    except (ModelError, TimeoutError) as e:
        err: BaseException = e  # `e` is unbound after the block; the lambda runs later
        await _write(deps, row.checkin_id, lambda c: _model_failed(c, deps, row, agent, err, now))
        return False
    except ModelRejected as e:
        reason = f"model {name!r} rejected the call: {e}"
        refused = e

        def end(c: Any) -> None:
            refused_notice(c, row.goal_id, name, refused.cause, refused.fix, now)
            _end(c, deps, row, now, "failed", "deciding", p, reason=reason)

        await _write(deps, row.checkin_id, end)
        return False
    cost = _cost(deps, reply)
    await _write(deps, row.checkin_id, lambda c: qc.advance(
        c, row.checkin_id, "deciding", status="decided", raw=reply.text[:MAX_REPLY_CHARS],
        model=reply.model, add_tokens=(reply.tokens_in, reply.tokens_out, cost),
        precheck={**p, "decided_at": deps.clock.now()},
    ))  # fmt: skip
    log.info("checkin.decided", checkin_id=row.checkin_id, model=reply.model)
    return True


def _model_failed(
    c: Any, deps: Deps, row: Checkin, agent: AgentConfig, err: BaseException, now: float
) -> None:
    """A failed call: back to due with a durable retry time (exponential, at least the
    provider's Retry-After, capped) — or, after MAX_MODEL_ATTEMPTS, the check-in ends failed."""
    attempts = int(row.precheck.get("attempts", 0)) + 1
    message = str(err) or "model call timed out"
    log.warning("checkin.model_failed", checkin_id=row.checkin_id, error=message, attempt=attempts)
    if attempts >= MAX_MODEL_ATTEMPTS:
        reason = f"model unavailable after {attempts} tries: {message}"
        fix = "check that the model server is up and answers within its timeout_s"
        refused_notice(c, row.goal_id, agent.checkin.model or agent.model, reason, fix, now)
        _end(c, deps, row, now, "failed", "deciding", {**row.precheck, "attempts": attempts},
             reason=reason)  # fmt: skip
        return
    limits = agent.limits
    delay = min(
        limits.retry_max_s,
        max(getattr(err, "retry_after_s", None) or 0.0, limits.retry_base_s * 2 ** (attempts - 1)),
    )
    qc.advance(c, row.checkin_id, "deciding", status="due", precheck={
        **row.precheck, "attempts": attempts, "retry_at": now + delay, "error": message[:500],
    })  # fmt: skip


def refused_notice(c: Any, goal_id: int, name: str, cause: str, fix: str, now: float) -> None:
    """One open notice per refusal (a check-in a day must not post one a day): the cause and
    the fix; the next check-in tries again as usual."""
    title = f"model {name} cannot answer: {cause}"[:200]
    if notices.open_item_titled(c, "model_refused", title) is None:
        qi.post(c, InboxKind.NOTICE, title=title, body=f"Cause: {cause}\nFix: {fix}",
                goal_id=goal_id, rule="model_refused", data={"posted_at": now})  # fmt: skip


def _cost(deps: Deps, reply: ModelReply) -> float | None:
    price = deps.config.price_of(reply.model)
    return price.cost_usd(reply.tokens_in, reply.tokens_out, reply.tokens_cached) if price else None


# ── decided → done | re-ask | failed ────────────────────────────────────────────────────────────


async def _settle(deps: Deps, row: Checkin, launch: Launch) -> bool:
    now = deps.clock.now()
    goal = await deps.store.read(lambda c: q.get_goal(c, row.goal_id))
    p = row.precheck
    error: str | None = None
    reply: Reply | None = None
    try:
        menu = deps.menu(goal.agent)
        must_ask = bool(p.get("must_ask"))
        reply = await asyncio.to_thread(
            checkin_prompt.parse, row.raw or "", menu, must_ask=must_ask
        )
    except ModelOutputInvalid as e:
        error = str(e)
    except KeyError:
        error = f"agent {goal.agent!r} is not in the config"
    except Exception as e:  # anything a hostile reply provokes is still just invalid
        error = f"reply could not be parsed ({type(e).__name__})"
    if reply is None:
        invalid = p.get("invalid", [])
        if len(invalid) < MAX_REASKS:
            again = {**p, "invalid": [*invalid, {"raw": (row.raw or "")[:2000], "error": error}]}
            await _write(deps, row.checkin_id, lambda c: qc.advance(
                c, row.checkin_id, "decided", status="deciding", raw=None, precheck=again))  # fmt: skip
            return True
        reason = f"invalid reply after {len(invalid) + 1} tries: {error}"
        await _write(
            deps, row.checkin_id, lambda c: _end(c, deps, row, now, "failed", "decided", p, reason)
        )
        log.warning("checkin.failed", checkin_id=row.checkin_id, reason=reason)
        return False
    started = await _write(deps, row.checkin_id, lambda c: _apply(c, deps, row, reply, now))
    if started is not None:
        launch(*started)  # after the commit: the run exists before anything drives it
    return False


def _apply(c: Any, deps: Deps, row: Checkin, reply: Reply, now: float) -> tuple[int, int] | None:
    """The verdict's effect, its memory entry and the next look — with the row's `done`."""
    goal = q.get_goal(c, row.goal_id)
    v = reply.verdict
    kind = v["kind"]
    effect: JSON = {"kind": kind}
    started = None
    if kind != "nothing" and goal.status != GoalStatus.ACTIVE:
        effect["skipped"] = f"goal is {goal.status}"
    elif kind == "nudge":
        effect.update(verdicts.nudge(c, row, v, now))
    elif kind == "ask":
        effect.update(verdicts.clarify(c, row, v["question"], now))
    elif kind == "start_run":
        if (active := q.active_run_of_goal(c, goal.goal_id)) is not None:
            effect["skipped"] = f"run {active} of the goal is still active"
        else:
            run_id = q.create_run(
                c, goal_id=goal.goal_id, agent=goal.agent, trigger=f"checkin:{row.checkin_id}",
                data={"request": v["request"], "checkin_id": row.checkin_id},
            )  # fmt: skip
            started = (run_id, leases.claim_run(c, run_id, deps.owner, deps.lease_s))
            effect["run_id"] = run_id
    elif kind == "achieved":
        effect.update(verdicts.achieved(c, row, v["evidence"], now))
    verdicts.remember(c, row, v, reply.reason, effect, now)
    decision = {"reason": reply.reason, "next_look_in_s": reply.next_look_in_s, "verdict": v}
    pre = (
        checkin_facts.held(row.precheck) if kind == "ask" and "item_id" in effect else row.precheck
    )
    _end(c, deps, row, now, "done", "decided", pre, reply.reason or kind,
         proposed=reply.next_look_in_s, decision=decision, effect=effect)  # fmt: skip
    log.info("checkin.done", checkin_id=row.checkin_id, verdict=kind, **effect)
    return started


# ── endings: every one schedules the next look ───────────────────────────────────────────────────


def _end(
    c: Any, deps: Deps, row: Checkin, now: float, status: str, expect: str, pre: JSON,
    reason: str, **kw: Any,
) -> None:  # fmt: skip
    goal = q.get_goal(c, row.goal_id)
    agent = deps.config.agents.get(goal.agent)
    if agent is None:
        qc.advance(c, row.checkin_id, expect, status=status, precheck=pre, reason=reason,
                   completed_at=now)  # fmt: skip
        return
    _complete(c, deps, row, goal, agent, now, status, pre, reason=reason, expect=expect, **kw)


def _complete(
    c: Any, deps: Deps, row: Checkin, goal: Goal, agent: AgentConfig, now: float, status: str,
    pre: JSON, *, reason: str, expect: str = "due", proposed: float | None = None,
    decision: JSON | None = None, effect: JSON | None = None,
) -> None:  # fmt: skip
    """End the check-in: count nudges left open as ignored (backing the cadence off once),
    then journal the ending and the goal's next look, in the caller's transaction."""
    if ignored := qc.mark_ignored(c, pre.get("ignored", []), row.checkin_id):
        qc.bump_backoff(c, goal.goal_id, now)
        mem.remember(c, goal.goal_id, "ignored",
                     f"{ignored} nudge(s) left unanswered: checking in less often",
                     f"checkin:{row.checkin_id}", now)  # fmt: skip
    next_at: float | None = None
    why = f"goal is {goal.status}"
    if goal.status in (GoalStatus.ACTIVE, GoalStatus.PAUSED) and agent.checkin.enabled:
        next_at, why = next_look(c, agent, goal, now, proposed)
        qc.set_next(c, goal.goal_id, next_at, why, now)
    fields: JSON = {"decision": decision, "effect": effect} if decision is not None else {}
    qc.advance(c, row.checkin_id, expect, status=status, precheck=pre, reason=reason,
               next_at=next_at, completed_at=now, **fields)  # fmt: skip
    if status == CheckinStatus.FAILED:
        verdicts.failing_notice(c, row, reason, now)


def next_look(
    c: Any, agent: AgentConfig, goal: Goal, now: float, proposed: float | None
) -> tuple[float, str]:
    """The goal's next look by its cadence (agent defaults ⊕ the goal's overrides and state)."""
    row = qc.cadence_row(c, goal.goal_id)
    cad = cadence.cadence_from(agent.checkin, row)
    deadline = goal.deadline.timestamp() if goal.deadline else None
    at, why = cadence.next_look(
        cad,
        now,
        proposed=proposed,
        backoff=int(row["backoff"]) if row else 0,
        deadline=deadline,
        snoozed_until=row["snoozed_until"] if row else None,
    )
    return spread(cad, goal.goal_id, agent.checkin.jitter_s, at, deadline), why


def spread(
    cad: cadence.Cadence, goal_id: int, jitter_s: float, at: float, deadline: float | None
) -> float:
    """A look pushed to the end of quiet hours gets the goal's stable jitter, so goals do not
    all look at 08:00:00 — unless that would enter quiet hours again or pass the deadline.
    (Only there: jittering every look would make a goal's looks drift by it each time.)"""
    if not cadence.in_quiet(cad, at - 1.0):
        return at
    later = at + schedule.jitter(goal_id, jitter_s)
    if cadence.in_quiet(cad, later) or (deadline is not None and at <= deadline < later):
        return at
    return later
