"""Recovering an action a crash interrupted (DESIGN.md §4.3): an intent journaled without a
result. No process of the interrupted execution may live on; then the action is re-run, verified
or asked about — by the config in force, never blindly.
"""

from __future__ import annotations

from typing import Any

import structlog

from agentd.actions import ActionContext, Executor
from agentd.db import queries as q
from agentd.harness import policy as harness
from agentd.harness import prompt
from agentd.models import InboxKind, Step, StepStatus, Verdict
from agentd.outside import process
from agentd.runs import control
from agentd.runs.acting import RunJournal
from agentd.sources import observe_all
from agentd.text import cut_at_word

log = structlog.get_logger("agentd.engine")


class Recovery(RunJournal):
    """The recovery of a run's interrupted action (a RunJournal that also recovers)."""

    async def recover_act(self, step: Step) -> None:
        """An intent without a result: the daemon died mid-action (DESIGN.md §4.3).

        First no process of the interrupted execution may still be alive (it could finish the
        effect after we decided it had not happened). Then the action is re-run only if the
        config in force still admits it as it was when the intent was journaled.
        """
        action, args = step.action or "", step.args or {}
        held = self.deps.held.pop((self.run_id, step.seq), None)
        if held is not None:  # this daemon ran it and holds the result: journal it, no more
            await self._complete(step, *held)
            return
        executor = self.deps.executors.get(action)
        ctx = self._context(step.seq, action, key=step.data.get("key"))
        spawned = step.data.get("spawned")
        # Where the intent was journaled, or its command spawned: a daemon frozen between the
        # fork and the spawn record's commit left only the first.
        host = process.elsewhere(spawned) or process.elsewhere({"host": step.data.get("host")})
        if host is not None and not (executor is not None and executor.idempotent):
            # Started by a daemon on another host (a shared database): its command may still
            # run there, out of our reach, whatever verify says now. Only the operator knows.
            log.warning("action.elsewhere", action=action, host=host, key=ctx.idempotency_key)
            await self.ask_unknown_outcome(
                step, ctx, f"it was started on {host}, which this daemon cannot reach to stop it"
            )
            return
        fenced = await (
            executor.fence(ctx, spawned)
            if executor is not None  # an action gone from the config may have left processes too
            else process.fence(spawned, ctx.idempotency_key if ctx.db_id else "")
        )  # (a bare `run:seq` key is the same in every home: never kill by it)
        if fenced.get("killed") or fenced.get("survivors"):
            log.warning("action.fenced", action=action, **fenced)
        if fenced.get("survivors"):  # still alive after SIGKILL: nothing is known, nothing re-run
            await self.ask_unknown_outcome(step, ctx, "a process of it could not be stopped")
            return
        blocked = self._rerun_blocked(step, executor)
        if executor is None:
            await self.ask_unknown_outcome(step, ctx, blocked)
            return
        if executor.idempotent and blocked:
            result = {"ok": False, "outcome": "unknown", "recovered": f"not re-run: {blocked}"}
            await self._complete(step, StepStatus.ERROR, result)
            return
        if executor.idempotent:
            status, result = await self._execute(executor, args, ctx)
            await self._complete(step, status, {**result, "recovered": "re-executed (idempotent)"})
            return
        happened = await executor.verify(args, ctx)
        log.warning("action.recovering", action=action, key=ctx.idempotency_key, verified=happened)
        if happened is True:
            await self._complete(step, StepStatus.DONE, {"ok": True, "recovered": "verified done"})
        elif happened is False and blocked:
            result = {"ok": False, "recovered": f"verified not done; not re-run: {blocked}"}
            await self._complete(step, StepStatus.ERROR, result)
        elif happened is False:
            status, result = await self._execute(executor, args, ctx)
            await self._complete(step, status, {**result, "recovered": "verified not done; ran"})
        else:
            await self.ask_unknown_outcome(step, ctx, blocked)

    def _rerun_blocked(self, step: Step, executor: Executor | None) -> str | None:
        """Why the config in force forbids running this intent again, or None."""
        action, args = step.action or "", step.args or {}
        if executor is None or action not in self.agent.actions:
            return f"{action} is no longer on this agent's menu"
        if step.data.get("config") not in (None, self._config_hash(action)):
            return f"{action}'s definition in config.toml changed since the intent"
        # The intent already holds its rate-limit reservation: count it as not yet used.
        check = harness.admit(action, args, self.menu, 0, approved=bool(step.data.get("approval")))
        return None if check.verdict == Verdict.ALLOW else check.rule

    async def ask_unknown_outcome(
        self, step: Step, ctx: ActionContext, blocked: str | None = None
    ) -> None:
        """Record the outcome as unknown and ask the operator — one transaction, so a crash
        in between cannot leave a finished step that nobody asked about."""
        world = await observe_all([self.deps.sources[n] for n in self.agent.sources])
        question = unknown_outcome_question(step, ctx.idempotency_key, blocked)
        ref = self.ref()
        item = {
            "title": cut_at_word(question), "body": f"{question}\nWorld now: {prompt.quote(world)}",
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
        log.warning("inbox.question_asked", item_id=wait.data.get("item_id"), why="unknown_outcome")


def unknown_outcome_question(step: Step, key: str, blocked: str | None) -> str:
    """The question an intent without a result asks: what happened, and the answers it takes
    (yes and no, as it asks yes or no; the runbook reads them, a model reads the words)."""
    retry = f"It will not be re-run: {blocked}." if blocked else "It will not be retried blindly."
    return (
        f"agentd stopped while running {step.action} {step.args} (key {key}) and cannot tell "
        f"whether it happened. {retry} Did it happen? Answer yes (it happened: the run goes on "
        "from there), no (it did not: the run may try it again) or stop (end the run); your "
        "answer is given to the run."
    )
