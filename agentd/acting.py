"""Journaling and acting for one run: the plumbing every step writes through, carrying out
actions (intent journaled first unless idempotent; approvals consumed in the same transaction),
recovering an action a crash interrupted, and the steps that suspend or end a run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from agentd import control, prompt
from agentd.actions import ActionContext, Executor
from agentd.config import BuiltinAction
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.deps import Deps
from agentd.errors import ActionFailed, Refused, StateError
from agentd.models import (
    JSON,
    Goal,
    InboxKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)
from agentd.sources import observe_all

log = structlog.get_logger("agentd.engine")


class RunJournal:
    """One run's journal in memory while it executes; every write goes to the store first."""

    def __init__(self, deps: Deps, run_id: int, epoch: int, steps: list[Step], goal: Goal) -> None:
        self.deps = deps
        self.run_id = run_id
        self.epoch = epoch
        self.steps = steps
        self.goal = goal
        self.goal_id = goal.goal_id
        self.agent_name = goal.agent
        self.agent = deps.config.agents[goal.agent]
        self.menu = deps.menu(goal.agent)
        self.world: JSON = {}
        self.changes: JSON = {}

    # ── plumbing ──────────────────────────────────────────────────────────────────────────────

    async def _write(self, work: Callable[[Any], Any]) -> Any:
        return await self.deps.store.write(work)

    async def _append(self, kind: StepKind, **kw: Any) -> Step:
        seq = len(self.steps) + 1  # the journal in memory is the run's whole journal
        step, row = q.step_insert(self.run_id, self.epoch, kind, seq, **kw)
        try:
            await self.deps.store.insert(row)
        except StateError as e:
            if "UNIQUE constraint" in str(e):  # a duplicate seq: another writer moved on
                raise Refused(f"run {self.run_id}: step {seq} not journaled ({e})") from None
            raise  # transient (a lock, I/O): the engine retries the run
        self.steps.append(step)
        log.info("step.recorded", seq=step.seq, kind=str(kind), action=step.action)
        return step

    def _trailing(self, pred: Callable[[Step], bool], skip: Callable[[Step], bool]) -> int:
        """How many steps at the end satisfy `pred`, looking past steps matching `skip`."""
        n = 0
        for s in reversed(self.steps):
            if pred(s):
                n += 1
            elif not skip(s):
                break
        return n

    # ── acting ────────────────────────────────────────────────────────────────────────────────

    async def act(self, action: str, args: JSON, approval: int | None = None) -> None:
        """Carry out an allowed (or approved) action: intent journaled first unless idempotent."""
        cfg = self.deps.config.action(action)
        digest = action_digest(action, args)
        if isinstance(cfg, BuiltinAction):
            try:
                await self.run_control(cfg, action, args, digest, approval)
            except Refused as e:
                if approval is None:
                    raise
                await self._approval_gone(action, args, digest, e)
            return
        executor = self.deps.executors[action]
        seq = len(self.steps) + 1
        ctx = ActionContext(self.run_id, self.goal_id, seq, action)
        if executor.idempotent and approval is None:
            # Safe to repeat after a crash, so one commit (with the result) is enough.
            status, result = await self._execute(executor, args, ctx)
            await self._append(
                StepKind.ACT, status=status, action=action, args=args, digest=digest, result=result
            )
            return

        def intent(c: Any) -> Step:
            if approval is not None:
                # The approval is consumed in the same transaction as the intent: at most once.
                qi.consume_approval(c, approval, digest, ctx.idempotency_key)
            return q.append_step(
                c,
                self.run_id,
                self.epoch,
                StepKind.ACT,
                status=StepStatus.STARTED,
                action=action,
                args=args,
                digest=digest,
                data={"approval": approval, "key": ctx.idempotency_key},
            )

        try:
            step: Step = await self._write(intent)
        except Refused as e:
            if approval is None:
                raise
            await self._approval_gone(action, args, digest, e)
            return
        self.steps.append(step)
        status, result = await self._execute(executor, args, ctx)
        await self._complete(step, status, result)

    async def _approval_gone(self, action: str, args: JSON, digest: str, err: Refused) -> None:
        """The approval is gone (withdrawn, used): journal it as a denial the model will see."""
        await self._append(
            StepKind.CHECK, action=action, args=args, digest=digest, verdict=Verdict.DENY,
            data={"rule": f"approval no longer valid: {err}", "escalate": False},
        )  # fmt: skip

    async def _execute(
        self, ex: Executor, args: JSON, ctx: ActionContext
    ) -> tuple[StepStatus, JSON]:
        log.info("action.executing", action=ctx.action, key=ctx.idempotency_key)
        try:
            result = await ex.execute(args, ctx)
        except ActionFailed as e:
            return StepStatus.ERROR, {"ok": False, "error": str(e)}
        return (StepStatus.DONE if result.get("ok", True) else StepStatus.ERROR), result

    async def _complete(self, step: Step, status: StepStatus, result: JSON) -> None:
        done: Step = await self._write(
            lambda c: q.complete_step(
                c, self.run_id, self.epoch, step.seq, status=status, result=result
            )
        )
        self.steps[-1] = done

    async def recover_act(self, step: Step) -> None:
        """An intent without a result: the daemon died mid-action (DESIGN.md §4.3)."""
        action, args = step.action or "", step.args or {}
        executor = self.deps.executors[action]
        ctx = ActionContext(self.run_id, self.goal_id, step.seq, action)
        if executor.idempotent:
            status, result = await self._execute(executor, args, ctx)
            await self._complete(step, status, {**result, "recovered": "re-executed (idempotent)"})
            return
        happened = await executor.verify(args, ctx)
        log.warning("action.recovering", action=action, key=ctx.idempotency_key, verified=happened)
        if happened is True:
            await self._complete(step, StepStatus.DONE, {"ok": True, "recovered": "verified done"})
        elif happened is False:
            status, result = await self._execute(executor, args, ctx)
            await self._complete(step, status, {**result, "recovered": "verified not done; ran"})
        else:
            await self.ask_unknown_outcome(step, ctx)

    async def ask_unknown_outcome(self, step: Step, ctx: ActionContext) -> None:
        """Record the outcome as unknown and ask the operator — one transaction, so a crash
        in between cannot leave a finished step that nobody asked about."""
        world = await observe_all([self.deps.sources[n] for n in self.agent.sources])
        question = (
            f"agentd stopped while running {step.action} {step.args} (key {ctx.idempotency_key}) "
            "and cannot tell whether it happened. It will not be retried blindly. "
            "Did it happen? Your answer is given to the run."
        )
        ref = self.ref()
        item = {
            "title": question[:200], "body": f"{question}\nWorld now: {prompt.quote(world)}",
            "seq": ref.seq, "rule": "unknown_outcome",
            "expires_at": self._expiry(InboxKind.QUESTION),
        }  # fmt: skip
        result = {"ok": False, "outcome": "unknown", "key": ctx.idempotency_key}

        def write(c: Any) -> tuple[Step, Step]:
            done = q.complete_step(
                c, self.run_id, self.epoch, step.seq, status=StepStatus.ERROR, result=result
            )
            return done, control.post_and_wait(
                c, ref, InboxKind.QUESTION, "unknown_outcome", **item
            )

        done, wait = await self._write(write)
        self.steps[-1:] = [done, wait]
        self.deps.on_change()

    async def run_control(
        self, cfg: BuiltinAction, action: str, args: JSON, digest: str, approval: int | None
    ) -> None:
        """Control actions change the run or the inbox; each is one transaction with its step."""
        if cfg.type == "finish":
            status = RunStatus.SUCCEEDED if args["outcome"] == "succeeded" else RunStatus.FAILED
            await self.finish(status, args["summary"], approval=approval, digest=digest)
            return
        seen = [s.data.get("events_seen", 0) for s in self.steps if s.kind == StepKind.OBSERVE]
        ref = self.ref()
        steps = await self._write(
            lambda c: control.control(
                c,
                ref,
                cfg,
                action,
                args,
                digest,
                approval=approval,
                events_seen=seen[-1] if seen else 0,
                expires_at=self._expiry(InboxKind.QUESTION),
            )
        )
        self.steps.extend(steps)
        self.deps.on_change()

    # ── suspending and ending ─────────────────────────────────────────────────────────────────

    def ref(self) -> control.RunRef:
        return control.RunRef(self.run_id, self.goal_id, self.epoch, len(self.steps) + 1)

    def _expiry(self, kind: InboxKind) -> float | None:
        rule = self.agent.policy.expire.get(kind.value)  # type: ignore[call-overload]
        return None if rule is None else time.time() + rule.after_s

    async def suspend(self, wait: JSON, **kw: Any) -> None:
        step: Step = await self._write(lambda c: q.suspend(c, self.run_id, self.epoch, wait, **kw))
        self.steps.append(step)
        self.deps.on_change()

    async def request_approval(self, checked: Step) -> None:
        action, args, digest = checked.action or "", checked.args or {}, checked.digest or ""
        decided = next(s for s in reversed(self.steps) if s.kind == StepKind.DECIDE)
        reason = decided.data.get("reason", "")
        body = (
            f"The run proposes {action} with arguments {args}.\n"
            f"Reason given: {reason}\n"
            f"Gated by: {checked.data.get('rule')}\n"
            f"World at the time: {prompt.quote(self.world)}"
        )
        ref = self.ref()
        item = {
            "title": f"approve {action}?", "body": body, "seq": checked.seq, "action": action,
            "args": args, "digest": digest, "rule": checked.data.get("rule"),
            "expires_at": self._expiry(InboxKind.APPROVAL),
            "data": {"reason": reason, "world": self.world},
        }  # fmt: skip
        step = await self._write(
            lambda c: control.post_and_wait(c, ref, InboxKind.APPROVAL, "approval", **item)
        )
        self.steps.append(step)
        self.deps.on_change()

    async def ask_operator(self, question: str, why: str) -> None:
        ref = self.ref()
        item = {
            "title": question[:200], "body": question, "seq": ref.seq, "rule": why,
            "expires_at": self._expiry(InboxKind.QUESTION),
        }  # fmt: skip
        step = await self._write(
            lambda c: control.post_and_wait(c, ref, InboxKind.QUESTION, why, **item)
        )
        self.steps.append(step)
        self.deps.on_change()

    async def finish(
        self,
        status: RunStatus,
        summary: str,
        *,
        approval: int | None = None,
        digest: str | None = None,
    ) -> None:
        ref = self.ref()
        step = await self._write(
            lambda c: control.finish(c, ref, status, summary, approval=approval, digest=digest)
        )
        self.steps.append(step)
        log.info("run.finished", status=str(status), summary=summary[:200])
