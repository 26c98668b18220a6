"""The decide step of a run: ask the model (or take the nudge the operator accepted), journal the
raw reply — text, model, usage, cost — before parsing it, then settle it as a decision or as an
invalid reply the next step feeds back. A journaled reply is never asked for again.
"""

from __future__ import annotations

import asyncio
import json

import structlog

from agentd.db import queries as q
from agentd.errors import ModelOutputInvalid
from agentd.harness import prompt
from agentd.harness.menu import MAX_REPLY_CHARS, Decision
from agentd.llm import ModelReply, ModelRequest
from agentd.models import JSON, GoalStatus, RunStatus, Step, StepKind, StepStatus, Verdict
from agentd.runs.model_calls import (
    CHARS_PER_TOKEN,
    ModelCalls,
    context_entry,
    context_room,
    estimate_tokens,
)

log = structlog.get_logger("agentd.engine")


class Deciding(ModelCalls):
    """A run's decisions (ModelCalls that also decide what to do next)."""

    def _recent_events(self) -> list[JSON]:
        looks = [st for st in self.steps if st.kind == StepKind.OBSERVE]
        return list(looks[-1].data.get("events", [])) if looks else []

    def _started_by(self) -> JSON | None:
        """The event that started the run (its name, data and id), when an event did."""
        start = next((s for s in self.steps if s.kind == StepKind.START), None)
        if start is None or not isinstance(start.data.get("event_id"), int):
            return None  # a watched state's run: its world says it
        return {k: start.data.get(k) for k in ("event", "event_id", "data")}

    async def decide(self) -> None:
        decisions = sum(1 for s in self.steps if s.kind == StepKind.DECIDE)
        if decisions >= self.agent.limits.max_steps:
            await self.finish(RunStatus.FAILED, f"stopped: {decisions} decisions reached max_steps")
            return
        if reason := await self._over_budget():
            await self.finish(RunStatus.FAILED, f"stopped: {reason}")
            return
        goal = await self.deps.store.read(lambda c: q.get_goal(c, self.goal_id))
        if goal.status != GoalStatus.ACTIVE:  # paused or closed: no new decision, visibly
            await self.finish(RunStatus.CANCELLED, f"stopped: goal {self.goal_id} is {goal.status}")
            return
        if decisions == 0 and (accepted := self._accepted_nudge()) is not None:
            await self._record_decision(accepted, 1, escalated=False)  # checked like any decision
            return
        if await self.maybe_summarize():
            return  # the SUMMARIZE step is journaled; the next advance decides
        escalating = self._escalating()
        name = (self.agent.escalation_model if escalating else None) or self.agent.model
        request = self._request(decisions + 1, name)
        reply = await self.call_model(name, request)
        if reply is not None:  # else parked: a durable retry, or a question to the operator
            await self._record_decision(reply, decisions + 1, escalating)

    def _accepted_nudge(self) -> ModelReply | None:
        """A run started by accepting a check-in's nudge decides first what the operator
        accepted — journaled as a DECIDE step like a model's reply, so the harness checks it
        (policy, approvals, limits) like any decision. No model is asked for it."""
        start = next((s.data for s in self.steps if s.kind == StepKind.START), {})
        suggested = start.get("suggested")
        if not isinstance(suggested, dict):
            return None
        nudge = start.get("nudge")
        action = {**(suggested.get("args") or {}), "kind": suggested.get("action")}
        text = json.dumps({"reason": f"the operator accepted nudge {nudge}", "action": action})
        return ModelReply(text=text, model=f"operator (accepted nudge {nudge})")

    def _escalating(self) -> bool:
        """A re-ask after an invalid reply, or a decision right after a denial."""
        last = self.steps[-1]
        if last.kind == StepKind.DECIDE:
            return True
        return any(s.kind == StepKind.CHECK and s.verdict == Verdict.DENY for s in self.steps[-3:])

    def _request(self, decision_no: int, name: str) -> ModelRequest:
        """The decision's request, its history cut until it fits the model's context_tokens
        (with room for the reply): a small local model's 4k context fills in a few steps. Still
        too long at one step, the prompt is made compact (dense menu, world cut to the room)."""
        window = self.agent.limits.history_steps
        room = context_room(self.deps.config.models.get(name))
        while True:
            system, text = self._prompt(window)
            if room is None or estimate_tokens(system + text) <= room:
                break
            if window <= 1:
                system, text = self._prompt(window, fit_chars=room * CHARS_PER_TOKEN)
                break
            window //= 2
        return ModelRequest(
            run_id=self.run_id,
            goal_id=self.goal_id,
            decision_no=decision_no,
            attempt=1 + self._retries(),
            system=system,
            prompt=text,
            schema=self.menu.schema(),
            context={
                "goal": {"title": self.goal.title, "why": self.goal.why},
                "menu": list(self.menu.models),
                "world": self.world,
                "changes": self.changes,
                "events": self._recent_events(),
                "history": [context_entry(s) for s in self.steps],
            },
        )

    def _prompt(self, history_steps: int, fit_chars: int | None = None) -> tuple[str, str]:
        last = self.steps[-1]
        feedback = last.data.get("error") if last.kind == StepKind.DECIDE else None
        return prompt.build(
            goal=self.goal,
            agent_description=self.agent.description,
            menu=self.menu.describe(),
            policy=prompt.describe_policy(
                dict(self.agent.policy.rules),
                self.agent.policy.default,
                dict(self.agent.policy.max_per_hour),
            ),
            world=self.world,
            changes=self.changes,
            events=self._recent_events(),
            started_by=self._started_by(),
            history=self.steps,
            history_steps=history_steps,
            feedback=feedback,
            fit_chars=fit_chars,
        )

    async def _record_decision(self, reply: ModelReply, decision_no: int, escalated: bool) -> None:
        """Journal the reply — raw text, model, usage, cost — *before* parsing it, so a reply
        that is slow or fatal to parse is never asked for again; then settle its outcome."""
        text = reply.text
        meta: JSON = {
            "raw": text[:MAX_REPLY_CHARS],
            "model": reply.model,
            "stop_reason": reply.stop_reason,
            "decision_no": decision_no,
            "tokens_cached": reply.tokens_cached,
            "cost_usd": self._cost(reply),
            "escalated": escalated,
        }
        if len(text) > MAX_REPLY_CHARS:
            meta["reply_chars"] = len(text)  # kept cut; the parse rejects it for its length
        tokens = {"tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out}
        step = await self._append(StepKind.DECIDE, status=StepStatus.STARTED, data=meta, **tokens)
        await self.settle_decision(step)

    async def settle_decision(self, step: Step) -> None:
        """Parse a journaled raw reply (off the event loop, bounded) and record the outcome."""
        meta = step.data
        d: Decision | None = None
        try:
            if "reply_chars" in meta:
                raise ModelOutputInvalid(
                    f"reply is {meta['reply_chars']} characters; the limit is {MAX_REPLY_CHARS}"
                    " — answer with one short JSON object"
                )
            d, error = await asyncio.to_thread(self.menu.parse, str(meta.get("raw", ""))), None
        except ModelOutputInvalid as e:
            d, error = None, str(e)
        except Exception as e:  # anything else a hostile reply provokes is still just invalid
            d, error = None, f"reply could not be parsed ({type(e).__name__})"
        if d is None:
            stop = meta.get("stop_reason")
            if stop in ("max_tokens", "length", "refusal"):
                error = f"the reply ended with stop reason {stop!r}: {error}"
            fields: JSON = {"status": StepStatus.ERROR, "data": {**meta, "error": error}}
        else:
            fields = {
                "status": StepStatus.DONE, "data": {**meta, "reason": d.reason},
                "action": d.action, "args": d.args, "digest": d.digest,
            }  # fmt: skip
        seq = step.seq
        done: Step = await self._write(
            lambda c: q.settle_decision(c, self.run_id, self.epoch, seq, **fields)
        )
        self.steps[-1] = done
