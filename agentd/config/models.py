"""The `[models.NAME]` tables: which decider a name means (an embedded one, or a vendor's API
reached through its SDK), discriminated by `provider`. Keys are named by environment variable,
never written in the file (see `_variable_name`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from agentd.config.actions import Strict
from agentd.config.sources import http_url


class ScriptedModel(Strict):
    provider: Literal["scripted"]
    replies: Path
    request_log: Path | None = None


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _variable_name(value: str | None) -> str | None:
    """`api_key_env` must name a variable. The value is never echoed: it may be a pasted key."""
    if value is None:
        return None
    # Variable names are short, or spelled in one case; a long mixed-case token is a key.
    mixed = all(any(test(c) for c in value) for test in (str.isdigit, str.islower, str.isupper))
    # …and keys (AKIA…, ghp_…, xoxb-…) are long runs of letters and digits with no word breaks:
    # a name has underscores between words, or is short.
    unbroken = len(value) >= 16 and "_" not in value.strip("_") and any(c.isdigit() for c in value)
    prefixed = value.lower().startswith(("ghp_", "gho_", "github_pat_", "xox", "sk_", "akia"))
    if not _VARIABLE.fullmatch(value) or (len(value) >= 32 and mixed) or unbroken or prefixed:
        raise ValueError(
            "api_key_env must be the NAME of an environment variable, e.g. ANTHROPIC_API_KEY "
            "(letters, digits and _), never the key: if a key was pasted here, remove it from "
            "the file and export it in that variable instead"
        )
    return value


class AnthropicModel(Strict):
    """Claude through Anthropic's Messages API, with the menu as structured output (no tools)."""

    provider: Literal["anthropic"]
    model: str  # e.g. "claude-sonnet-4-5"
    api_key_env: str  # the variable holding the key, e.g. "ANTHROPIC_API_KEY"; never the key
    base_url: str | None = None  # a gateway or proxy; default Anthropic's API
    max_tokens: int = Field(1024, ge=1)  # output cap per decision; a longer reply is cut off
    timeout_s: float = Field(60.0, gt=0)  # the whole call; then it is retried durably

    _api_key_env_is_a_name = field_validator("api_key_env")(_variable_name)
    _base_url_is_requestable = field_validator("base_url")(http_url)


class OpenAIModel(Strict):
    """OpenAI's Chat Completions API, or any server compatible with it (`base_url`), with the menu
    as a strict JSON-schema response format (no tools)."""

    provider: Literal["openai"]
    model: str  # e.g. "gpt-4.1-mini", or the name a local server gives its model
    api_key_env: str | None = None  # required for OpenAI's API; a local server may need none
    base_url: str | None = None  # an OpenAI-compatible server, e.g. "http://127.0.0.1:8000/v1"
    max_tokens: int = Field(1024, ge=1)
    timeout_s: float = Field(60.0, gt=0)  # the whole call, however long: no hidden ceiling
    # How the menu's schema reaches the server: "json_schema" (OpenAI, vLLM, llama.cpp's
    # llama-server, Ollama), "json_object" with the schema beside it (llama-cpp-python), or
    # "prompt" (the schema in the system text; agentd's validation the only gate). "auto" tries
    # them in that order on the first call and remembers what the server accepted.
    structured_output: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    # The server's context window in tokens: prompts are built to fit it (with room for
    # max_tokens), and an overflow names it. None: unknown (OpenAI's models are large).
    context_tokens: int | None = Field(None, ge=256)
    # Calls in flight at once to this model; None: 1 for a local server (a CPU or one GPU
    # computes one reply at a time, and a retry after a timeout must not queue behind the
    # abandoned call), unbounded for a hosted API.
    concurrency: int | None = Field(None, ge=1)

    _api_key_env_is_a_name = field_validator("api_key_env")(_variable_name)
    _base_url_is_requestable = field_validator("base_url")(http_url)

    @property
    def local(self) -> bool:
        """Whether base_url names this machine or a private network (a local server)."""
        return is_local_url(self.base_url)

    @property
    def max_in_flight(self) -> int | None:
        return self.concurrency if self.concurrency is not None else (1 if self.local else None)

    @model_validator(mode="after")
    def _key_or_local_server(self) -> OpenAIModel:
        if self.api_key_env is None and self.base_url is None:
            raise ValueError(
                'set api_key_env (e.g. "OPENAI_API_KEY") for OpenAI\'s API, '
                "or base_url for a local OpenAI-compatible server"
            )
        return self


# The providers that call a vendor over the network and need a key (doctor checks them).
OtherModel = AnthropicModel | OpenAIModel

# What the loops allow a model without its own timeout_s (scripted, runbook, template): they
# answer at once, so this only bounds a fake that hangs.
EMBEDDED_TIMEOUT_S = 120.0


def call_timeout_s(cfg: object) -> float:
    """The wall time a loop allows one call to this model: its own timeout_s (plus a second, so
    the provider's timeout, which says what happened, fires first) — no hidden ceiling."""
    own = getattr(cfg, "timeout_s", None)
    return float(own) + 1.0 if isinstance(own, int | float) else EMBEDDED_TIMEOUT_S


def is_local_url(url: str | None) -> bool:
    """Whether an http(s) URL names loopback, a private network or a .local/.lan host."""
    if not url:
        return False
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".lan")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class RunbookModel(Strict):
    """The embedded service-watch decider: a readable, deterministic runbook (no API key)."""

    provider: Literal["runbook"]
    health_source: str = "health"  # the http source whose health the runbook restores
    logs_action: str = "fetch_logs"
    restart_action: str = "restart"
    rollback_action: str = "rollback"
    healthy_checks: int = Field(2, ge=1)  # healthy looks in a row before finishing
    recheck_s: float = Field(2.0, gt=0)  # how long to wait before looking again


class TemplateModel(Strict):
    """The embedded build writer and judge: deterministic, from the material's facts (no key)."""

    provider: Literal["template"]


ModelConfig = Annotated[
    ScriptedModel | RunbookModel | TemplateModel | AnthropicModel | OpenAIModel,
    Field(discriminator="provider"),
]


class Price(Strict):
    """USD per million tokens for one model id, as the provider reports it."""

    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)
    cached_usd_per_mtok: float | None = Field(None, ge=0)  # default: the input price

    def cost_usd(self, tokens_in: int, tokens_out: int, tokens_cached: int = 0) -> float:
        cached_rate = (
            self.input_usd_per_mtok
            if self.cached_usd_per_mtok is None
            else self.cached_usd_per_mtok
        )
        fresh = max(tokens_in - tokens_cached, 0)
        return (
            fresh * self.input_usd_per_mtok
            + tokens_cached * cached_rate
            + tokens_out * self.output_usd_per_mtok
        ) / 1e6
