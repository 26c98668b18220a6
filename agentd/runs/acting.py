"""Journaling and acting for one run: the plumbing every step writes through, carrying out
actions (intent journaled first unless idempotent; approvals consumed in the same transaction),
and the steps that suspend or end a run. Recovering an interrupted action is `recovery`'s.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable
from typing import Any

import structlog

from agentd.actions import ActionContext, Executor
from agentd.config import AgentConfig, BuiltinAction
from agentd.db import accounting, stamp
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.errors import ActionFailed, Refused, StateError
from agentd.harness import policy as harness
from agentd.harness import prompt
from agentd.harness.menu import Menu
from agentd.models import (
    JSON,
    Goal,
    GoalStatus,
    InboxKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)
from agentd.runs import claims, control
from agentd.runs.deps import Deps
from agentd.text import cut_at_word

log = structlog.get_logger("agentd.engine")


class _Refusal(Exception):  # flow control inside a transaction, never escapes
    """The harness refused at execution time; raised inside the intent's transaction to roll
    it back (approval consumption included)."""

    def __init__(self, check: harness.Check) -> None:
        super().__init__(check.rule)
        self.check = check


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
        self._agent = deps.config.agents[goal.agent]
        self._menu = deps.menu(goal.agent)
        self.world: JSON = {}
        self.changes: JSON = {}

    # A SIGHUP reload swaps deps.config: a run mid-way meets it at its next check. An agent the
    # reload removed keeps the config it had; the engine stops its runs at their next wake.
    @property
    def agent(self) -> AgentConfig:
        return self.deps.config.agents.get(self.agent_name, self._agent)

    @property
    def menu(self) -> Menu:
        if self.agent_name in self.deps.config.agents:
            return self.deps.menu(self.agent_name)
        return self._menu

    # ── plumbing ──────────────────────────────────────────────────────────────────────────────

    async def _write(self, work: Callable[[Any], Any]) -> Any:
        return await self.deps.store.write(work)

    async def _append(self, kind: StepKind, **kw: Any) -> Step:
        seq = len(self.steps) + 1  # the journal in memory is the run's whole journal
        kw.setdefault("created_at", self.deps.clock.now())  # no transaction to stamp it in
        step, row = q.step_insert(self.run_id, self.epoch, kind, seq, **kw)
        try:
            await self.deps.store.insert(row)
        except StateError as e:
            # A duplicate seq: another writer moved on (SQLite's "UNIQUE constraint failed",
            # PostgreSQL's "violates unique constraint").
            if "unique constraint" in str(e).lower():
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
        """Carry out an allowed (or approved) action.

        The harness runs again inside the transaction that journals the intent (and consumes the
        approval): the menu, policy, argument schema and rate limit of the config in force now,
        with the rate limit counted and reserved in that same transaction. Only then does the
        action execute; its result is journaled after.
        """
        if action not in self.agent.actions:
            await self._refuse(action, args, approval, f"{action} is no longer on the menu")
            return
        cfg = self.deps.config.action(action)
        digest = action_digest(action, args)
        try:
            if isinstance(cfg, BuiltinAction):
                await self.run_control(cfg, action, args, digest, approval)
                return
            step = await self._write(lambda c: self._intent(c, action, args, digest, approval))
        except _Refusal as r:
            await self._refuse(action, args, approval, r.check.rule, needs=r.check.verdict)
            return
        except Refused as e:
            if approval is None:
                raise
            await self._refuse(action, args, approval, f"approval no longer valid: {e}")
            return
        self.steps.append(step)
        ctx = self._context(step.seq, action)
        committed = time.monotonic()  # the intent's commit: how soon the action starts after it
        status, result = await self._execute(self.deps.executors[action], args, ctx, committed)
        # Held in memory until journaled: a transient failure to write it must not make the
        # retry re-run the action or ask the operator about an outcome we know.
        self.deps.held[(self.run_id, step.seq)] = (status, result)
        try:
            await self._complete(step, status, result)
        except Refused as e:  # cancelled (or taken over) while it ran: the result still shows
            await self._orphan_result(action, args, ctx, result, e)
            raise
        self.deps.held.pop((self.run_id, step.seq), None)

    async def _orphan_result(
        self, action: str, args: JSON, ctx: ActionContext, result: JSON, err: Refused
    ) -> None:
        self.deps.held.pop((self.run_id, ctx.seq), None)
        title = f"run {self.run_id}: {action} finished after the run stopped"
        body = (
            f"{action} {args} (key {ctx.idempotency_key}) finished after its run stopped "
            f"({err}); its result is not in the run's journal: {prompt.quote(result)}"
        )
        await self._write(
            lambda c: qi.post(
                c,
                InboxKind.NOTICE,
                title=title,
                body=body,
                goal_id=self.goal_id,
                run_id=self.run_id,
            )
        )

    def admit(self, c: Any, action: str, args: JSON, digest: str, approval: int | None) -> None:
        """Inside the intent's transaction: consume the approval (bound to the arguments *and*
        the action's config as approved) and re-run the harness; _Refusal rolls it all back."""
        if approval is not None:
            item = qi.consume_approval(c, approval, digest, self.ref().key)
            approved_cfg = item.data.get("config_hash")
            if approved_cfg is not None and approved_cfg != self._config_hash(action):
                raise _Refusal(harness.Check(
                    Verdict.DENY,
                    f"{action}'s definition in config.toml changed since approval "
                    f"{approval} was given; it is not run under the new definition",
                ))  # fmt: skip
        goal = q.get_goal(c, self.goal_id)
        if goal.status != GoalStatus.ACTIVE:  # paused (or closed) since deciding: nothing runs
            raise _Refusal(harness.Check(Verdict.DENY, f"goal {self.goal_id} is {goal.status}"))
        menu, acts = self.menu, 0
        if action in menu.agent.policy.max_per_hour:  # counted (and reserved) only when limited
            hour_ago = stamp.now(c) - 3600  # on the clock the ACT steps (the rate log) carry
            acts = accounting.acts_to_admit(c, self.agent_name, action, hour_ago)
        check = harness.admit(action, args, menu, acts, approved=approval is not None)
        if check.verdict != Verdict.ALLOW:
            raise _Refusal(check)

    def _intent(self, c: Any, action: str, args: JSON, digest: str, approval: int | None) -> Step:
        self.admit(c, action, args, digest, approval)
        ref = self.ref()
        # `host`: where it runs, for a daemon on another host recovering it (runs/recovery.py)
        data = {"approval": approval, "key": ref.key, "config": self._config_hash(action),
                "host": socket.gethostname()}  # fmt: skip
        return q.append_step(
            c, self.run_id, self.epoch, StepKind.ACT, status=StepStatus.STARTED, action=action,
            args=args, digest=digest, data=data,
        )  # fmt: skip

    def _config_hash(self, action: str) -> str:
        return harness.config_hash(self.deps.config.action(action))

    def _resolved(self, action: str, args: JSON) -> JSON:
        return harness.resolved(self.deps.config.action(action), action, args)

    def _context(self, seq: int, action: str, key: str | None = None) -> ActionContext:
        """The execution's identity; a command's process group is journaled as it starts.
        Recovery passes the key the intent was journaled with: verify and re-runs see the very
        key the interrupted execution saw (an intent journaled before keys carried the
        database id keeps its old form)."""
        db_id = (
            self.deps.db_id if key is None else key.rsplit(":", 2)[0] if key.count(":") == 2 else ""
        )

        async def spawned(record: JSON) -> None:
            await self._write(
                lambda c: q.note_step(c, self.run_id, self.epoch, seq, {"spawned": record})
            )

        return ActionContext(self.run_id, self.goal_id, seq, action, db_id=db_id, on_spawn=spawned)

    async def _refuse(
        self,
        action: str,
        args: JSON,
        approval: int | None,
        rule: str,
        needs: Verdict = Verdict.DENY,
    ) -> None:
        """Journal a refusal at execution time as a CHECK the run reacts to like any verdict:
        APPROVE (the policy now gates it) asks for an approval, DENY is fed back or escalated.
        A consumed-or-not approval that did not lead to execution is closed, never left
        looking granted; a rate limit refusal leaves a notice."""
        denials = self._trailing(
            lambda s: s.kind == StepKind.CHECK and s.verdict == Verdict.DENY,
            lambda s: s.kind not in (StepKind.CHECK, StepKind.ACT),
        )
        escalate = needs == Verdict.DENY and denials + 1 >= self.agent.limits.max_denials
        ref = self.ref()

        def write(c: Any) -> Step:
            if approval is not None:
                qi.withdraw_item(c, approval, f"not executed: {rule}")
            if rule.startswith("rate limit"):
                qi.post(
                    c, InboxKind.NOTICE, title=cut_at_word(f"{action} refused at execution: {rule}"),
                    body=f"Run {self.run_id} wanted {action} {args}; refused: {rule}.",
                    goal_id=self.goal_id, run_id=self.run_id, seq=ref.seq,
                )  # fmt: skip
            return q.append_step(
                c, self.run_id, self.epoch, StepKind.CHECK, action=action, args=args,
                digest=action_digest(action, args), verdict=needs,
                data={"rule": rule, "escalate": escalate, "at": "execution"},
            )  # fmt: skip

        step: Step = await self._write(write)
        self.steps.append(step)
        log.warning("action.refused", action=action, rule=rule, verdict=str(needs))

    async def _execute(
        self, ex: Executor, args: JSON, ctx: ActionContext, committed: float | None = None
    ) -> tuple[StepStatus, JSON]:
        if not self.deps.lease_ok():  # thawed past the fence, before the keeper could run
            raise Refused(
                f"run {self.run_id}: this daemon's lease may have lapsed; {ctx.action} not started"
            )  # the intent stays without a result: its next owner recovers it (invariant 3)
        log.info("action.executing", action=ctx.action, key=ctx.idempotency_key)
        lag_s = None if committed is None else time.monotonic() - committed
        tracing = self.deps.tracing
        try:
            with tracing.child(f"action {ctx.action}", **{"agentd.action": ctx.action,
                               "agentd.run_id": self.run_id, "agentd.seq": ctx.seq}):  # fmt: skip
                ctx = dataclasses.replace(ctx, traceparent=tracing.traceparent())
                result = await ex.execute(args, ctx)
        except ActionFailed as e:
            self.deps.meter.action(ctx.action, "failed", lag_s)
            return StepStatus.ERROR, {"ok": False, "error": str(e)}
        ok = result.get("ok", True)
        self.deps.meter.action(ctx.action, "ok" if ok else "error", lag_s)
        return (StepStatus.DONE if ok else StepStatus.ERROR), result

    async def _complete(self, step: Step, status: StepStatus, result: JSON) -> None:
        done: Step = await self._write(
            lambda c: q.complete_step(
                c, self.run_id, self.epoch, step.seq, status=status, result=result
            )
        )
        self.steps[-1] = done

    async def run_control(
        self, cfg: BuiltinAction, action: str, args: JSON, digest: str, approval: int | None
    ) -> None:
        """Control actions change the run or the inbox; each is one transaction with its step,
        admitted by the harness (and consuming its approval) inside that transaction."""
        ref = self.ref()
        if cfg.type == "finish":
            status = RunStatus.SUCCEEDED if args["outcome"] == "succeeded" else RunStatus.FAILED
            summary = args["summary"]
            # A claimed success is checked against the world that started the run, looked at
            # again now (the last look may predate a slow decision and the world's recovery).
            if status == RunStatus.SUCCEEDED and (
                holds := await claims.still_holds(self.steps, self.world, self.deps.sources)
            ):
                status, summary = (
                    RunStatus.FAILED,
                    f"unconfirmed success: {holds}. Claimed: {summary}",
                )

            def finish(c: Any) -> list[Step]:
                self.admit(c, action, args, digest, approval)
                if summary is not args["summary"]:  # the watch tries again after a cool-down
                    claims.cool_down(
                        c,
                        self.goal_id,
                        self.steps,
                        stamp.now(c) + self.agent.limits.unconfirmed_cooldown_s,
                    )
                return [control.finish(c, ref, status, summary)]

            self.steps.extend(await self._write(finish))
            log.info("run.finished", status=str(status), summary=args["summary"][:200])
            return
        seen = [s.data.get("events_seen", 0) for s in self.steps if s.kind == StepKind.OBSERVE]

        def work(c: Any) -> list[Step]:
            self.admit(c, action, args, digest, approval)
            if cfg.type in ("notify", "ask"):
                text = str(args.get("message") or args.get("question") or "")
                per_hour = self.agent.limits.max_notices_per_hour
                kind = "question" if cfg.type == "ask" else "notice"
                why = claims.notice_refusal(c, self.run_id, kind, text, per_hour)
                if why is not None:
                    raise _Refusal(harness.Check(Verdict.DENY, why))
            return control.control(
                c, ref, cfg, action, args, digest, approval=approval,
                events_seen=seen[-1] if seen else 0, expires_at=self._expiry(InboxKind.QUESTION),
                clock=self.deps.clock,
            )  # fmt: skip

        steps = await self._write(work)
        self.steps.extend(steps)
        self.deps.on_change()
        if cfg.type == "ask":  # warning: a person must answer before the run goes on
            item_id = (steps[0].result or {}).get("item_id")
            log.warning("inbox.question_asked", item_id=item_id, why="question")

    # ── suspending and ending ─────────────────────────────────────────────────────────────────

    def ref(self) -> control.RunRef:
        return control.RunRef(
            self.run_id, self.goal_id, self.epoch, len(self.steps) + 1, self.deps.db_id
        )

    def _expiry(self, kind: InboxKind) -> float | None:
        rule = self.agent.policy.expire.get(kind.value)  # type: ignore[call-overload]
        return None if rule is None else self.deps.clock.now() + rule.after_s

    async def suspend(self, wait: JSON, **kw: Any) -> None:
        step: Step = await self._write(lambda c: qt.suspend(c, self.run_id, self.epoch, wait, **kw))
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
            "data": {
                "reason": reason, "world": self.world, "resolved": self._resolved(action, args),
                "config_hash": self._config_hash(action),
            },
        }  # fmt: skip
        step = await self._write(
            lambda c: control.post_and_wait(c, ref, InboxKind.APPROVAL, "approval", **item)
        )
        self.steps.append(step)
        self.deps.on_change()
        # warning: a person must act before the run goes on (operators alert on it)
        item_id = step.data.get("item_id")
        log.warning("inbox.approval_requested", item_id=item_id, action=action, rule=item["rule"])

    async def ask_operator(self, question: str, why: str) -> None:
        ref = self.ref()
        item = {
            "title": cut_at_word(question), "body": question, "seq": ref.seq, "rule": why,
            "expires_at": self._expiry(InboxKind.QUESTION),
        }  # fmt: skip
        step = await self._write(
            lambda c: control.post_and_wait(c, ref, InboxKind.QUESTION, why, **item)
        )
        self.steps.append(step)
        self.deps.on_change()
        log.warning("inbox.question_asked", item_id=step.data.get("item_id"), why=why)

    async def finish(self, status: RunStatus, summary: str) -> None:
        ref = self.ref()
        step = await self._write(lambda c: control.finish(c, ref, status, summary))
        self.steps.append(step)
        log.info("run.finished", status=str(status), summary=summary[:200])
