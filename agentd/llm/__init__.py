"""The one-method Model interface every provider implements, and the provider registry.
An adapter (the only importers of the model SDKs): may import config/ and the ground only.

A provider turns a ModelRequest (system text, prompt, the menu's JSON schema) into a ModelReply whose
raw text the engine journals *before* validating it. Providers raise ModelError for failures worth a
durable retry; they never decide what is valid — `agentd.harness.menu` does.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from agentd.config import (
    AnthropicModel,
    ModelConfig,
    OpenAIModel,
    RunbookModel,
    ScriptedModel,
    TemplateModel,
)
from agentd.models import JSON


@dataclass(frozen=True)
class ModelRequest:
    run_id: int
    goal_id: int
    decision_no: int  # 1-based count of decisions asked for in this run (deterministic on resume)
    attempt: int  # 1-based try of this decision after failed calls (durable backoff)
    system: str
    prompt: str
    schema: JSON
    # The same facts as structured data (world, changes, history, menu) for deciders that are
    # code, not text models — the runbook. Text models use `prompt` only.
    context: JSON = field(default_factory=dict)
    # "decide" picks an action from the menu; "summarize" folds old history into a summary
    # (schema SUMMARY_SCHEMA; context["history"] holds the steps to fold, context["previous"]
    # the summary so far).
    purpose: str = "decide"
    # An output cap for this call, above the model's configured max_tokens (a build's draft is
    # longer than a decision); None: the model's own.
    max_tokens: int | None = None


SUMMARY_SCHEMA: JSON = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}


def mechanical_summary(context: JSON) -> str:
    """A summary without a model: what code deciders answer, and the fallback when a model fails."""
    history: list[JSON] = context.get("history", [])
    acts = [h for h in history if h.get("kind") == "act"]
    done = ", ".join(f"{h.get('action')} ({'ok' if h.get('ok') else 'failed'})" for h in acts)
    first = history[0]["seq"] if history else 0
    last = history[-1]["seq"] if history else 0
    previous = context.get("previous") or ""
    text = f"Steps {first}–{last}: {len(acts)} actions" + (f": {done}." if done else ".")
    refused = [h for h in history if h.get("kind") == "check" and h.get("verdict") == "deny"]
    if refused:  # a summary of only what ran hides what the harness stopped
        text += " Refused: " + ", ".join(f"{h.get('action')} ({h.get('rule')})" for h in refused)
        text += "."
    return f"{previous} {text}".strip()[-2000:]


@dataclass(frozen=True)
class ModelReply:
    text: str
    model: str
    stop_reason: str = "end"
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0  # input tokens served from the provider's prompt cache


class Model(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...


def build(name: str, cfg: ModelConfig) -> Model:
    # Each vendor SDK is imported only when a model uses it (and only by its own module).
    if isinstance(cfg, ScriptedModel):
        from agentd.llm.scripted import ScriptedProvider

        return ScriptedProvider(name, cfg)
    if isinstance(cfg, RunbookModel):
        from agentd.llm.runbook import Runbook

        return Runbook(name, cfg)
    if isinstance(cfg, TemplateModel):
        from agentd.llm.template import Template

        return Template(name, cfg)
    if isinstance(cfg, AnthropicModel):
        from agentd.llm.anthropic import AnthropicProvider

        return AnthropicProvider(name, cfg)
    assert isinstance(cfg, OpenAIModel)  # the discriminated union has no other member
    from agentd.llm.openai import OpenAIProvider

    return OpenAIProvider(name, cfg)


# ── helpers the network providers share ──────────────────────────────────────────────────────────

STATUS_DETAIL_CHARS = 300  # enough for a vendor's error message; bodies can be long


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The server's wait hint in seconds: `retry-after-ms`, else `retry-after` as seconds or an
    HTTP date; None when absent or unparseable (the engine then uses its own backoff)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    when = email.utils.parsedate_tz(value)
    return None if when is None else max(float(email.utils.mktime_tz(when) - time.time()), 0.0)


def error_detail(body: object) -> str:
    """`type: message` from a vendor's JSON error body (`{"error": {...}}` or the inner object)."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ""
    kind, message = err.get("type") or err.get("code"), err.get("message")
    text = ": ".join(str(p) for p in (kind, message) if p)
    return text[:STATUS_DETAIL_CHARS]


def redact(text: str, secret: str | None) -> str:
    """`text` with the secret blanked out: vendors quote parts of what they were sent in their
    error messages, and a message that reaches the journal or the inbox must never carry the key."""
    return text.replace(secret, "[redacted]") if secret else text


def log_completed(provider: str, reply: ModelReply, started: float) -> None:
    """One debug line per successful vendor call (the engine logs failures as llm.failed)."""
    structlog.get_logger("agentd.llm").debug(
        "llm.completed",
        provider=provider,
        model=reply.model,
        stop_reason=reply.stop_reason,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        tokens_cached=reply.tokens_cached,
        duration_s=round(time.monotonic() - started, 3),
    )
