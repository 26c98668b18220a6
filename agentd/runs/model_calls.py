"""A run's model calls, shared by every kind of run driver: the budget check before a call, the
cost of a reply, a durable backoff after a failed call, and folding old history into a summary so
prompts stay bounded.
"""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime
from typing import Any

import structlog

from agentd.config import Budget
from agentd.db import accounting
from agentd.errors import ModelError, ModelRejected
from agentd.harness import policy as harness
from agentd.harness import prompt
from agentd.harness.menu import MAX_REPLY_CHARS
from agentd.llm import SUMMARY_SCHEMA, ModelReply, ModelRequest, mechanical_summary
from agentd.models import JSON, Step, StepKind
from agentd.runs.acting import RunJournal

log = structlog.get_logger("agentd.engine")
MODEL_TIMEOUT_S = 120.0


class ModelCalls(RunJournal):
    """Model calls of one run (a RunJournal that also asks models)."""

    async def maybe_summarize(self) -> bool:
        """Fold older history into a journaled summary once it outgrows twice the window, so
        prompts stop growing with the run. Only right after a look (never between a rejected
        reply and its re-ask). A failing summary model falls back to a mechanical summary."""
        window = self.agent.limits.history_steps
        if self.steps[-1].kind != StepKind.OBSERVE:
            return False
        last = next((s for s in reversed(self.steps) if s.kind == StepKind.SUMMARIZE), None)
        through = int(last.data["through_seq"]) if last else 0
        recent = [s for s in self.steps if s.seq > through and s.kind != StepKind.SUMMARIZE]
        if len(recent) <= 2 * window:
            return False
        fold = recent[:-window]
        previous = last.data.get("summary") if last else None
        context = {"previous": previous, "history": [context_entry(s) for s in fold]}
        request = ModelRequest(
            run_id=self.run_id, goal_id=self.goal_id, decision_no=0, attempt=1,
            system=prompt.SUMMARY_SYSTEM, prompt=prompt.summary_prompt(previous, fold),
            schema=SUMMARY_SCHEMA, context=context, purpose="summarize",
        )  # fmt: skip
        name = self.agent.summary_model or self.agent.model
        data: JSON = {"through_seq": fold[-1].seq, "folded": len(fold)}
        tokens: JSON = {}
        try:
            async with asyncio.timeout(MODEL_TIMEOUT_S):
                reply = await self.deps.complete(name, request)
            summary = _summary_text(reply.text)
            data.update(model=reply.model, raw=reply.text[:4000], cost_usd=self._cost(reply))
            tokens = {"tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out}
        except (ModelError, ModelRejected, TimeoutError) as e:
            summary = mechanical_summary(context)
            data.update(fallback=str(e) or "summary model timed out")
        await self._append(StepKind.SUMMARIZE, data={**data, "summary": summary}, **tokens)
        return True

    async def _over_budget(self) -> str | None:
        budget = self.agent.budget
        if budget == Budget():
            return None
        now = datetime.fromtimestamp(self.deps.clock.now(), UTC)  # the day of the steps' times
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)

        def read(c: Any) -> tuple[JSON, JSON]:
            return (
                accounting.goal_spend(c, self.goal_id),
                accounting.goal_spend(c, self.goal_id, midnight.timestamp()),
            )

        total, today = await self.deps.store.read(read)
        return harness.over_budget(budget, total, today)

    def _cost(self, reply: ModelReply) -> float | None:
        """USD for one call from the [prices] table; None when the model has no price."""
        price = self.deps.config.price_of(reply.model)
        return (
            price.cost_usd(reply.tokens_in, reply.tokens_out, reply.tokens_cached)
            if price
            else None
        )

    async def backoff(self, err: BaseException) -> None:
        """A failed model call: sleep durably (a wake time on the run), no coroutine held.

        Exponential from retry_base_s, at least the provider's Retry-After, jittered ±20 %
        so runs that failed together do not retry together, capped at retry_max_s.
        """
        limits = self.agent.limits
        attempt = 1 + self._retries()
        hint = getattr(err, "retry_after_s", None)
        growth = 2 ** min(attempt - 1, 30)  # capped: days of outage must not overflow a float
        base = limits.retry_base_s * growth * random.uniform(0.8, 1.2)  # noqa: S311
        delay = min(limits.retry_max_s, max(hint or 0.0, base))
        message = str(err) or "model call timed out"
        log.warning("llm.failed", error=message, retry_in_s=round(delay, 2), attempt=attempt)
        await self.suspend(
            {"kind": "timer", "why": "model_retry", "error": message, "attempt": attempt},
            wake_in_s=delay,
            clock=self.deps.clock,  # from the WAIT step, on the injected clock
        )

    def _retries(self) -> int:
        """Failed calls for the decision being asked: model_retry waits since the last step."""
        return self._trailing(
            lambda s: s.kind == StepKind.WAIT and s.data.get("why") == "model_retry",
            lambda s: s.kind == StepKind.WAKE,
        )


def _summary_text(raw: str) -> str:
    """The summary from a reply: JSON {"summary": ...} when valid, else the text itself."""
    try:  # bounded like decisions: a hostile summary reply is just text, never an error
        parsed = json.loads(raw) if len(raw) <= MAX_REPLY_CHARS else None
    except (ValueError, RecursionError):
        parsed = None
    text = parsed.get("summary") if isinstance(parsed, dict) else None
    return str(text if isinstance(text, str) else raw).strip()[:2000]


def _act_error(result: JSON) -> str:
    """A failed action's result in one line: its error, or exit code and last stderr line."""
    if result.get("error"):
        return str(result["error"])[:300]
    lines = str(result.get("stderr") or result.get("stdout") or "").strip().splitlines()
    said = f": {lines[-1][:200]}" if lines else ""
    if result.get("timed_out"):
        return f"timed out{said}"
    if "status" in result:  # an HTTP action
        return f"HTTP {result['status']}"
    return f"exit code {result.get('exit_code', '?')}{said}"


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
        if (s.result or {}).get("outcome") == "unknown":  # a stop mid-action: nobody knows
            entry["outcome"] = "unknown"
        elif entry["ok"] is False:  # what went wrong, for the runbook's question to the operator
            entry["error"] = _act_error(s.result or {})
    elif s.kind == StepKind.CHECK:
        entry["rule"] = s.data.get("rule")
    elif s.kind == StepKind.START:
        entry["trigger"] = s.data
    elif s.kind in (StepKind.WAIT, StepKind.WAKE):
        keys = ("why", "woke_by", "action", "withdrew", "answer", "item_kind")
        entry.update({k: s.data[k] for k in keys if k in s.data})
        if s.kind == StepKind.WAKE and "status" in s.data:
            entry["status"] = s.data["status"]  # the inbox item's status (approved, denied…)
    return entry
