"""A build run's model calls: each bounded (steps, budget, goal status, a model fit to write or
judge), with a durable backoff after a failure; replies parsed off the event loop, within the size
limit, and an invalid one journaled with its error for the re-ask to show the model.
"""

from __future__ import annotations

import asyncio

import structlog

from agentd.config import Config, RunbookModel
from agentd.config.build import BuildConfig
from agentd.db import queries as q
from agentd.harness.menu import MAX_REPLY_CHARS
from agentd.inner import prompts
from agentd.llm import ModelReply, ModelRequest
from agentd.models import JSON, GoalStatus, RunStatus, Step, StepKind, StepStatus
from agentd.runs.engine import RunDriver
from agentd.runs.model_calls import estimate_tokens

log = structlog.get_logger("agentd.build")
RAW_KEPT = 2000  # characters of an invalid reply kept in its step (the error says what was wrong)


def unfit_model(config: Config, agent: str, name: str) -> str | None:
    """Why a model cannot write or judge artifacts (the runbook only decides service watches)."""
    if isinstance(config.models.get(name), RunbookModel):
        return (
            f"model {name!r} is the service-watch runbook, which cannot write or judge artifacts;"
            f' set [agents.{agent}.build] model = "…" (e.g. a provider = "template" model, or a'
            " real one)"
        )
    return None


def retry_step(s: Step) -> bool:
    """A durable model backoff's WAIT or WAKE, which the build's next step looks past."""
    return s.kind in (StepKind.WAIT, StepKind.WAKE) and s.data.get("why") == "model_retry"


class BuildCalls(RunDriver):
    """The model calls of a build run (a RunDriver whose model makes and judges artifacts)."""

    @property
    def bcfg(self) -> BuildConfig:
        return self.agent.build

    def _generator(self) -> str:
        return self.bcfg.model or self.agent.model

    def _calls(self, kind: StepKind) -> int:
        return sum(1 for s in self.steps if s.kind == kind)

    async def _call(
        self, purpose: str, name: str, system: str, text: str, schema: JSON, context: JSON
    ) -> ModelReply | None:
        """One model call, or None when the run moved on instead (backoff, budget, goal)."""
        if len(self.steps) >= self.agent.limits.max_steps * 4:
            await self.finish(RunStatus.FAILED, f"stopped: {len(self.steps)} steps")
            return None
        if reason := await self._over_budget():
            await self.finish(RunStatus.FAILED, f"stopped: {reason}")
            return None
        goal = await self.deps.store.read(lambda c: q.get_goal(c, self.goal_id))
        if goal.status != GoalStatus.ACTIVE:
            await self.finish(RunStatus.CANCELLED, f"stopped: goal {self.goal_id} is {goal.status}")
            return None
        if unfit := unfit_model(self.deps.config, self.goal.agent, name):
            await self.finish(RunStatus.FAILED, f"stopped: {unfit}")
            return None
        kind = StepKind(purpose)
        request = ModelRequest(
            run_id=self.run_id, goal_id=self.goal_id, decision_no=self._calls(kind) + 1,
            attempt=1 + self._retries(), system=system, prompt=text, schema=schema,
            context=context, purpose=purpose, max_tokens=self._output_cap(name, system + text),
        )  # fmt: skip
        return await self.call_model(name, request)  # None: parked (retry, or operator)

    def _output_cap(self, name: str, prompt_text: str) -> int:
        """The build's max_tokens, cut to what the model's context_tokens leaves after the
        prompt (a server would shrink it quietly, or refuse the request)."""
        context = getattr(self.deps.config.models.get(name), "context_tokens", None)
        if not isinstance(context, int):
            return self.bcfg.max_tokens
        left = context - estimate_tokens(prompt_text) - context // 10
        return max(min(self.bcfg.max_tokens, left), 64)

    def _meta(self, reply: ModelReply, kind: StepKind) -> JSON:
        return {
            "model": reply.model, "stop_reason": reply.stop_reason, "cost_usd": self._cost(reply),
            "tokens_cached": reply.tokens_cached, "decision_no": self._calls(kind) + 1,
        }  # fmt: skip

    @staticmethod
    def _tokens(reply: ModelReply) -> JSON:
        return {"tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out}

    @staticmethod
    async def _parse(reply: ModelReply, required: tuple[str, ...]) -> JSON:
        if len(reply.text) > MAX_REPLY_CHARS:
            raise ValueError(f"reply is {len(reply.text)} characters; the limit is "
                             f"{MAX_REPLY_CHARS}")  # fmt: skip
        if reply.stop_reason in ("max_tokens", "length"):
            raise ValueError("the reply was cut off (max_tokens): answer shorter")
        return await asyncio.to_thread(prompts.parse_object, reply.text, required)

    async def _invalid_reply(self, kind: StepKind, meta: JSON, reply: ModelReply, err: str) -> None:
        data = {**meta, "error": err, "raw": reply.text[:RAW_KEPT]}
        await self._append(kind, status=StepStatus.ERROR, data=data, **self._tokens(reply))
        log.warning("build.invalid_reply", step=str(kind), error=err)

    def _feedback(self, kind: StepKind) -> str | None:
        last = next((s for s in reversed(self.steps) if not retry_step(s)), None)
        if last is not None and last.kind == kind and last.status == StepStatus.ERROR:
            return str(last.data.get("error"))
        return None
