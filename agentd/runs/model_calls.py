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

from agentd.config import Budget, call_timeout_s
from agentd.db import accounting, notices
from agentd.db import transitions as qt
from agentd.errors import ModelError, ModelRejected
from agentd.harness import policy as harness
from agentd.harness import prompt
from agentd.harness.menu import MAX_REPLY_CHARS
from agentd.llm import SUMMARY_SCHEMA, ModelReply, ModelRequest, mechanical_summary
from agentd.models import JSON, InboxKind, Step, StepKind
from agentd.runs import control
from agentd.runs.acting import RunJournal

log = structlog.get_logger("agentd.engine")
REFUSED_RULE = "model_refused"  # the rule of the inbox question a refused or failing model posts


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
            async with asyncio.timeout(self.call_timeout_s(name)):
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

    def call_timeout_s(self, name: str) -> float:
        """The model's own timeout_s (no hidden ceiling over it)."""
        return call_timeout_s(self.deps.config.models.get(name))

    async def call_model(self, name: str, request: ModelRequest) -> ModelReply | None:
        """One call; None when it failed and the run was parked (a durable retry, or a question
        to the operator when the server refused the request or failed too often)."""
        try:
            async with asyncio.timeout(self.call_timeout_s(name)):
                return await self.deps.complete(name, request)
        except (ModelError, TimeoutError) as e:
            await self.backoff(e, name, request)
        except ModelRejected as e:
            await self.model_refused(name, e.cause, e.fix, e.reason)
        return None

    async def backoff(
        self, err: BaseException, name: str = "", request: ModelRequest | None = None
    ) -> None:
        """A failed model call: sleep durably (a wake time on the run), no coroutine held —
        or, after limits.max_model_retries failures in a row, stop and ask the operator.

        Exponential from retry_base_s, at least the provider's Retry-After, jittered ±20 %
        so runs that failed together do not retry together, capped at retry_max_s. A call
        abandoned on its timeout may still have been served: the WAIT step counts it (`agentd
        usage`), with its prompt tokens estimated.
        """
        limits = self.agent.limits
        attempt = 1 + self._retries()
        message = str(err) or "model call timed out"
        if attempt > limits.max_model_retries:
            fix = (
                f"check that the model server is up and answers within models.{name}.timeout_s "
                "(`agentd doctor --ping`), then answer this question to try again"
            )
            await self.model_refused(name, f"{attempt} failed calls in a row: {message}", fix)
            return
        hint = getattr(err, "retry_after_s", None)
        growth = 2 ** min(attempt - 1, 30)  # capped: days of outage must not overflow a float
        base = limits.retry_base_s * growth * random.uniform(0.8, 1.2)  # noqa: S311
        delay = min(limits.retry_max_s, max(hint or 0.0, base))
        log.warning("llm.failed", error=message, retry_in_s=round(delay, 2), attempt=attempt)
        wait: JSON = {"kind": "timer", "why": "model_retry", "error": message, "attempt": attempt}
        # Only the provider's own timeout says the request went out (a call still waiting for
        # its turn at a busy local server was never served, and costs nothing).
        if request is not None and getattr(err, "timed_out", False):
            model = getattr(self.deps.config.models.get(name), "model", name)
            estimate = (len(request.system) + len(request.prompt)) // 4
            wait["abandoned"] = {"model": model, "tokens_in_est": estimate}
        await self.suspend(
            wait,
            wake_in_s=delay,
            clock=self.deps.clock,  # from the WAIT step, on the injected clock
        )

    async def model_refused(self, name: str, cause: str, fix: str, reason: str = "") -> None:
        """The model cannot answer until someone changes something: no retry storm. The run
        parks on ONE open question naming the cause and the fix (shared by every run the same
        refusal stops); any answer, once fixed, retries the call."""
        log.warning("llm.rejected", model=name, error=cause, reason=reason)
        title = f"model {name} cannot answer: {cause}"[:200]
        body = (
            f"Cause: {cause}\nFix: {fix}\nAnswer this (any answer) once fixed: waiting runs retry."
        )
        ref = self.ref()

        def write(c: Any) -> Step:
            item_id = notices.open_item_titled(c, REFUSED_RULE, title)
            if item_id is None:
                return control.post_and_wait(
                    c, ref, InboxKind.QUESTION, "model_retry", title=title, body=body,
                    seq=ref.seq, rule=REFUSED_RULE,
                )  # fmt: skip
            wait = {"kind": "inbox", "item_id": item_id, "why": "model_retry"}
            return qt.suspend(c, ref.run_id, ref.epoch, wait, item_id=item_id)

        step: Step = await self._write(write)
        self.steps.append(step)
        self.deps.on_change()

    def _retries(self) -> int:
        """Failed calls for the decision being asked: model_retry timer waits since the last
        step (a question to the operator about them ends the count)."""
        return self._trailing(
            lambda s: (
                s.kind == StepKind.WAIT
                and s.data.get("why") == "model_retry"
                and s.data.get("kind") == "timer"
            ),
            lambda s: s.kind == StepKind.WAKE,
        )


CHARS_PER_TOKEN = 3  # a cautious average for English and JSON (real tokenizers: 3–4.5)


def estimate_tokens(text: str) -> int:
    """Tokens a text takes, estimated (no tokenizer for every server's model)."""
    return len(text) // CHARS_PER_TOKEN + 1


def context_room(cfg: object, reply_tokens: int | None = None) -> int | None:
    """Prompt tokens that fit a model's context_tokens with room for its reply (None: unknown).
    The schema and the chat template take their share too: a tenth of the context is kept."""
    context = getattr(cfg, "context_tokens", None)
    if not isinstance(context, int):
        return None
    reply = reply_tokens if reply_tokens is not None else int(getattr(cfg, "max_tokens", 0) or 0)
    return max(context - reply - context // 10, context // 4)


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
