"""The one-method Model interface every provider implements, and the provider registry.

A provider turns a ModelRequest (system text, prompt, the menu's JSON schema) into a ModelReply whose
raw text the engine journals *before* validating it. Providers raise ModelError for failures worth a
durable retry; they never decide what is valid — `agentd.decide` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from agentd.config import ModelConfig, RunbookModel, ScriptedModel
from agentd.errors import ConfigError
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
    if isinstance(cfg, ScriptedModel):
        from agentd.llm.scripted import ScriptedProvider

        return ScriptedProvider(name, cfg)
    if isinstance(cfg, RunbookModel):
        from agentd.llm.runbook import Runbook

        return Runbook(name, cfg)
    raise ConfigError(
        f"models.{name}: provider {cfg.provider!r} is not available in this build yet; "
        'use provider = "scripted" or "runbook"'
    )
