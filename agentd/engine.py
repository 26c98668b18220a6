"""The engine: advance a run one journaled step at a time, from whatever its journal says is next.

observe → decide → check → act | ask | wait | finish. The next step is a pure function of the last
journaled one, so a restart resumes exactly where the journal stops. A run task exists only while a
run executes; waiting runs are rows that the scheduler wakes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from agentd import control, harness, prompt
from agentd.actions import ActionContext, Executor
from agentd.config import BuiltinAction, Config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.decide import Decision, Menu
from agentd.errors import ActionFailed, AgentdError, ModelError, ModelOutputInvalid, Refused
from agentd.llm import Model, ModelRequest
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
from agentd.sources import Source, observe_all

log = structlog.get_logger("agentd.engine")
LEASE_S = 300.0
MODEL_TIMEOUT_S = 120.0


@dataclass
class Deps:
    """Everything the engine talks to, built once by the daemon (or a test) and passed down."""

    config: Config
    store: Store
    models: dict[str, Model]
    executors: dict[str, Executor]
    sources: dict[str, Source]
    owner: str
    menus: dict[str, Menu] = field(default_factory=dict)
    on_change: Callable[[], None] = lambda: (
        None
    )  # nudges the scheduler after a commit it may act on

    def menu(self, agent: str) -> Menu:
        if agent not in self.menus:
            self.menus[agent] = Menu(self.config, self.config.agents[agent])
        return self.menus[agent]


class Engine:
    """Runs executing runs as tasks, at most `max_concurrent_runs` at a time."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.slots = asyncio.Semaphore(deps.config.daemon.max_concurrent_runs)
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.relaunch: dict[int, int] = {}
        self.stopping = False

    def launch(self, run_id: int, epoch: int) -> None:
        """Start driving a run at lease `epoch`.

        If a task for the run is still winding down (it just suspended and was woken at once), the
        launch is queued for when that task ends, so a woken run is never left without a driver.
        """
        if self.stopping:
            return
        if run_id in self.tasks:
            self.relaunch[run_id] = epoch
            return
        task = asyncio.create_task(self._drive(run_id, epoch), name=f"run-{run_id}")
        self.tasks[run_id] = task
        task.add_done_callback(lambda _t: self._ended(run_id))

    def _ended(self, run_id: int) -> None:
        self.tasks.pop(run_id, None)
        if run_id in self.relaunch:
            self.launch(run_id, self.relaunch.pop(run_id))

    async def _drive(self, run_id: int, epoch: int) -> None:
        async with self.slots:
            structlog.contextvars.bind_contextvars(run_id=run_id)
            driver: RunDriver | None = None
            try:
                driver = await RunDriver.load(self.deps, run_id, epoch)
                structlog.contextvars.bind_contextvars(goal_id=driver.goal_id)
                while not self.stopping and await driver.advance():
                    pass
            except Refused as e:  # lease lost or run cancelled under us: stop touching it
                log.warning("run.released", reason=str(e))
            except Exception as e:
                log.exception("run.stalled")
                if driver is not None:
                    await self._park(driver, e)

    async def _park(self, driver: RunDriver, err: Exception) -> None:
        """A step failed unexpectedly: hand the run to the operator instead of leaving it stuck."""
        try:
            await driver.ask_operator(
                f"Run {driver.run_id} stopped on an internal error: {err}. Answer to let it "
                "observe and decide again, or cancel it with `agentd runs cancel`.",
                why="internal_error",
            )
        except Exception:
            log.exception("run.park_failed")

    async def stop(self, grace_s: float) -> None:
        """Take no new step; give steps in flight `grace_s` to reach their journal point."""
        self.stopping = True
        pending = list(self.tasks.values())
        if not pending:
            return
        _done, late = await asyncio.wait(pending, timeout=grace_s)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=5)
            log.warning("engine.cancelled_in_flight", runs=len(late))


class RunDriver:
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

    @classmethod
    async def load(cls, deps: Deps, run_id: int, epoch: int) -> RunDriver:
        def read(c: Any) -> tuple[Any, list[Step], JSON]:
            run = q.get_run(c, run_id)
            steps = q.list_steps(c, run_id)
            world: JSON = {}
            snapshots = [s.data["snapshot_id"] for s in steps if "snapshot_id" in s.data]
            if snapshots:
                world = q.get_snapshot(c, snapshots[-1])
            return q.get_goal(c, run.goal_id), steps, world

        goal, steps, world = await deps.store.read(read)
        if goal.agent not in deps.config.agents:
            raise AgentdError(f"run {run_id}: agent {goal.agent!r} is no longer in the config")
        driver = cls(deps, run_id, epoch, steps, goal)
        driver.world = world
        if steps and steps[-1].kind == StepKind.OBSERVE:
            driver.changes = steps[-1].data.get("changes", {})
        return driver

    # ── plumbing ──────────────────────────────────────────────────────────────────────────────

    async def _write(self, work: Callable[[Any], Any]) -> Any:
        return await self.deps.store.write(work)

    async def _append(self, kind: StepKind, **kw: Any) -> Step:
        step: Step = await self._write(
            lambda c: q.append_step(c, self.run_id, self.epoch, kind, **kw)
        )
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

    # ── the state machine ─────────────────────────────────────────────────────────────────────

    async def advance(self) -> bool:
        """Take the next step; False when the run is no longer executing (waiting or finished)."""
        last = self.steps[-1]
        if last.kind in (StepKind.WAIT, StepKind.FINISH):
            return False
        if last.kind == StepKind.OBSERVE:
            await self.decide()
        elif last.kind == StepKind.DECIDE:
            await (self.check(last) if last.action else self.after_invalid())
        elif last.kind == StepKind.CHECK:
            await self.after_check(last)
        elif last.kind == StepKind.ACT and last.status == StepStatus.STARTED:
            await self.recover_act(last)
        elif last.kind == StepKind.WAKE:
            await self.after_wake(last)
        else:  # START, a finished ACT
            await self.observe()
        return True

    async def observe(self) -> None:
        sources = [self.deps.sources[name] for name in self.agent.sources]
        raw = await observe_all(sources)

        def write(c: Any) -> tuple[Step, JSON]:
            snapshot_id, world, diff, _ = control.record_world(
                c, self.agent_name, self.run_id, raw, time.time()
            )
            data = {"snapshot_id": snapshot_id, "changes": diff, "events_seen": qi.last_event_id(c)}
            return q.append_step(c, self.run_id, self.epoch, StepKind.OBSERVE, data=data), world

        step, self.world = await self._write(write)
        self.steps.append(step)
        self.changes = step.data["changes"]

    async def decide(self) -> None:
        decisions = sum(1 for s in self.steps if s.kind == StepKind.DECIDE)
        if decisions >= self.agent.limits.max_steps:
            await self.finish(RunStatus.FAILED, f"stopped: {decisions} decisions reached max_steps")
            return
        last = self.steps[-1]
        feedback = last.data.get("error") if last.kind == StepKind.DECIDE else None
        system, text = prompt.build(
            goal=self.goal,
            agent_description=self.agent.description,
            menu=self.menu.describe(),
            world=self.world,
            changes=self.changes,
            history=self.steps,
            history_steps=self.agent.limits.history_steps,
            feedback=feedback,
        )
        request = ModelRequest(
            run_id=self.run_id,
            goal_id=self.goal_id,
            decision_no=decisions + 1,
            attempt=1 + self._retries(),
            system=system,
            prompt=text,
            schema=self.menu.schema(),
            context={
                "goal": {"title": self.goal.title, "why": self.goal.why},
                "menu": list(self.menu.models),
                "world": self.world,
                "changes": self.changes,
                "history": [context_entry(s) for s in self.steps],
            },
        )
        model = self.deps.models[self.agent.model]
        try:
            async with asyncio.timeout(MODEL_TIMEOUT_S):
                reply = await model.complete(request)
        except (ModelError, TimeoutError) as e:
            await self.backoff(e)
            return
        meta = {
            "raw": reply.text[:20000],
            "model": reply.model,
            "stop_reason": reply.stop_reason,
            "decision_no": decisions + 1,
        }
        tokens = {"tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out}
        try:
            d = self.menu.parse(reply.text)
        except ModelOutputInvalid as e:
            await self._append(
                StepKind.DECIDE, status=StepStatus.ERROR, data={**meta, "error": str(e)}, **tokens
            )
            return
        await self._append(
            StepKind.DECIDE,
            action=d.action,
            args=d.args,
            digest=d.digest,
            data={**meta, "reason": d.reason},
            **tokens,
        )

    async def backoff(self, err: BaseException) -> None:
        """A failed model call: sleep durably (a wake time on the run), no coroutine held."""
        limits = self.agent.limits
        attempt = 1 + self._retries()
        hint = getattr(err, "retry_after_s", None)
        delay = min(limits.retry_max_s, max(hint or 0.0, limits.retry_base_s * 2 ** (attempt - 1)))
        message = str(err) or "model call timed out"
        log.warning("llm.failed", error=message, retry_in_s=delay, attempt=attempt)
        await self.suspend(
            {"kind": "timer", "why": "model_retry", "error": message, "attempt": attempt},
            wake_at=time.time() + delay,
        )

    def _retries(self) -> int:
        """Failed calls for the decision being asked: model_retry waits since the last step."""
        return self._trailing(
            lambda s: s.kind == StepKind.WAIT and s.data.get("why") == "model_retry",
            lambda s: s.kind == StepKind.WAKE,
        )

    async def after_invalid(self) -> None:
        invalid = self._trailing(
            lambda s: s.kind == StepKind.DECIDE and not s.action, lambda s: False
        )
        if invalid <= self.agent.limits.max_invalid_outputs:
            await self.decide()
            return
        await self.ask_operator(
            f"The model gave {invalid} invalid replies in a row; last error: "
            f"{self.steps[-1].data.get('error')}. What should this run do?",
            why="invalid_output",
        )

    async def check(self, decided: Step) -> None:
        d = Decision(decided.action or "", decided.args or {}, decided.data.get("reason", ""))
        earlier = [
            s.digest or "" for s in self.steps[:-1] if s.kind == StepKind.DECIDE and s.action
        ]
        denials = self._trailing(
            lambda s: (
                (s.kind == StepKind.CHECK and s.verdict == Verdict.DENY)
                or (s.kind == StepKind.WAKE and s.data.get("status") in ("denied", "expired"))
            ),
            lambda s: s.kind not in (StepKind.CHECK, StepKind.ACT),
        )
        since = time.time() - 3600
        acts = await self.deps.store.read(
            lambda c: q.count_acts_since(c, self.agent_name, d.action, since)
        )
        facts = harness.Facts(tuple(earlier), acts, denials)
        verdict = harness.check(d, self.agent, facts, self.deps.config.action(d.action).type)
        await self._append(
            StepKind.CHECK,
            action=d.action,
            args=d.args,
            digest=d.digest,
            verdict=verdict.verdict,
            data={"rule": verdict.rule, "escalate": verdict.escalate},
        )

    async def after_check(self, checked: Step) -> None:
        action, args = checked.action or "", checked.args or {}
        if checked.verdict == Verdict.ALLOW:
            await self.act(action, args)
        elif checked.verdict == Verdict.APPROVE:
            await self.request_approval(checked)
        elif checked.data.get("escalate"):
            await self.ask_operator(
                f"The harness refused {action} {args} ({checked.data.get('rule')}). "
                "What should this run do instead?",
                why="denied",
            )
        else:
            await self.observe()

    async def after_wake(self, woke: Step) -> None:
        why = woke.data
        if why.get("why") == "model_retry":
            await self.decide()
        elif why.get("item_kind") == InboxKind.APPROVAL and why.get("status") == "approved":
            await self.act(why["action"], why["args"], approval=why["item_id"])
        else:
            await self.observe()

    # ── acting ────────────────────────────────────────────────────────────────────────────────

    async def act(self, action: str, args: JSON, approval: int | None = None) -> None:
        """Carry out an allowed (or approved) action: intent journaled first unless idempotent."""
        cfg = self.deps.config.action(action)
        digest = action_digest(action, args)
        if isinstance(cfg, BuiltinAction):
            await self.run_control(cfg, action, args, digest, approval)
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
            # The approval is gone (withdrawn, used): journal it as a denial the model will see.
            await self._append(
                StepKind.CHECK, action=action, args=args, digest=digest, verdict=Verdict.DENY,
                data={"rule": f"approval no longer valid: {e}", "escalate": False},
            )  # fmt: skip
            return
        self.steps.append(step)
        status, result = await self._execute(executor, args, ctx)
        await self._complete(step, status, result)

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


def context_entry(s: Step) -> JSON:
    """One journal step as plain data for code deciders (the runbook); no raw model text."""
    entry: JSON = {
        "seq": s.seq,
        "kind": str(s.kind),
        "action": s.action,
        "args": s.args,
        "status": str(s.status),
        "verdict": str(s.verdict) if s.verdict else None,
    }
    if s.kind == StepKind.ACT:
        entry["ok"] = (s.result or {}).get("ok")
    elif s.kind == StepKind.START:
        entry["trigger"] = s.data
    elif s.kind in (StepKind.WAIT, StepKind.WAKE):
        keys = ("why", "woke_by", "action", "withdrew", "answer")
        entry.update({k: s.data[k] for k in keys if k in s.data})
        if s.kind == StepKind.WAKE and "status" in s.data:
            entry["status"] = s.data["status"]  # the inbox item's status (approved, denied…)
    return entry
