"""The `openai` provider: Chat Completions (OpenAI's API or a compatible local server), with the
menu as a strict JSON-schema response format — no tools.

`strict_schema` rewrites the menu's pydantic schema into the subset strict mode accepts. The raw
reply text (or the refusal) goes back to the engine, which journals it before `agentd.harness.menu`
validates it. SDK exceptions are translated here; no message ever contains the API key.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

import openai
import structlog
from openai.types.chat import ChatCompletion

from agentd import config
from agentd.config import OpenAIModel
from agentd.errors import ModelError, ModelRejected
from agentd.llm import (
    STATUS_DETAIL_CHARS,
    ModelReply,
    ModelRequest,
    error_detail,
    formats,
    log_completed,
    redact,
    retry_after_s,
)
from agentd.models import JSON

if TYPE_CHECKING:
    import httpx2

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_KEY = "local"  # compatible servers want some bearer token, and most ignore it

# finish_reason in the engine's words: "end", "max_tokens" (cut off), "refusal".
STOP_REASONS = {"stop": "end", "length": "max_tokens", "content_filter": "refusal"}

# The response format's name per request purpose (the model sees it; ^[A-Za-z0-9_-]{1,64}$).
FORMAT_NAMES = {
    "decide": "decision",
    "summarize": "summary",
    "checkin": "checkin",
    "plan": "build_plan",
    "generate": "artifact",
    "judge": "verdict",
}


class OpenAIProvider:
    """A Model backed by `openai.AsyncOpenAI`; the client is built on first use."""

    def __init__(
        self, name: str, cfg: OpenAIModel, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None
        self._key: str | None = None  # kept only to scrub it from vendor messages
        # The structured-output mode the server accepted (probed on the first call in "auto").
        self.structured_output: str | None = (
            None if cfg.structured_output == "auto" else cfg.structured_output
        )
        self._refused = 0  # modes (from the start of MODES) the server refused, never re-probed
        limit = cfg.max_in_flight
        self._slots = asyncio.Semaphore(limit) if limit is not None else None

    async def aclose(self) -> None:
        """Close the SDK client's connection pool (for shutdown or a config reload)."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            env = self.cfg.api_key_env
            key = config.secret(env) if env is not None else LOCAL_KEY
            if key is None:
                raise ModelRejected(
                    f"models.{self.name}: ${env} is not set in the daemon's environment; "
                    "set it (or change api_key_env) and restart the daemon"
                )
            self._key = key if env is not None else None
            self._client = openai.AsyncOpenAI(
                api_key=key,
                # Explicit, so OPENAI_BASE_URL cannot silently send the key elsewhere.
                base_url=self.cfg.base_url or DEFAULT_BASE_URL,
                max_retries=0,  # the engine backs off durably (a wake time on the run)
                timeout=self.cfg.timeout_s,
                http_client=self._http_client,
            )
        return self._client

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One call; in "auto" mode, the first calls probe the structured-output modes in
        order until the server accepts one, which is then used for every later call."""
        if self._slots is None:
            return await self._complete(request)
        async with self._slots:  # a local server computes one reply at a time
            return await self._complete(request)

    async def _complete(self, request: ModelRequest) -> ModelReply:
        # A refused mode is remembered at once: a next mode's call that then times out (a slow
        # CPU model) must not send the refused one again on every retry.
        modes = (self.structured_output,) if self.structured_output else formats.MODES
        for i, mode in enumerate(modes):
            if not self.structured_output and i < self._refused:
                continue
            try:
                reply = await self._call(request, mode)
            except _FormatRefused as e:
                if i + 1 == len(modes):
                    raise e.error from None
                log.warning("llm.format_refused", model=self.name, mode=mode, next=modes[i + 1])
                self._refused = max(self._refused, i + 1)
                continue
            if self.structured_output != mode:
                self.structured_output = mode
                log.info("llm.structured_output", model=self.name, mode=mode)
            return reply
        raise AssertionError("unreachable: MODES is not empty")

    async def _call(self, request: ModelRequest, mode: str) -> ModelReply:
        client = self._sdk()
        cap = max(self.cfg.max_tokens, request.max_tokens or 0)
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens);
        # compatible servers (vLLM, llama.cpp, Ollama) all understand the older max_tokens.
        local = self.cfg.base_url is not None
        schema = strict_schema(request.schema, keep_lengths=local)
        name = FORMAT_NAMES.get(request.purpose, request.purpose)
        fmt = formats.response_format(mode, name, schema)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                completion = await client.chat.completions.create(
                    model=self.cfg.model,
                    messages=[
                        {
                            "role": "system",
                            "content": formats.system_for(mode, request.system, schema),
                        },
                        {"role": "user", "content": request.prompt},
                    ],
                    response_format=cast(Any, fmt) if fmt is not None else openai.omit,
                    max_tokens=cap if local else openai.omit,
                    max_completion_tokens=openai.omit if local else cap,
                )
        except (openai.OpenAIError, TimeoutError) as e:
            failure = self._translate(e, mode)
        else:
            reply = self._reply(completion)
            log_completed("openai", reply, started)
            return reply
        # Raised outside the handler: no chained SDK exception (which holds the request and its
        # auth header) travels with ours into logs or tracebacks.
        raise failure

    def _reply(self, completion: ChatCompletion) -> ModelReply:
        if not completion.choices:
            raise ModelError(f"models.{self.name}: the reply had no choices")
        choice = completion.choices[0]
        text = choice.message.content or ""
        stop = STOP_REASONS.get(choice.finish_reason, choice.finish_reason)
        if choice.message.refusal:
            text, stop = choice.message.refusal, "refusal"
        usage = completion.usage
        details = usage.prompt_tokens_details if usage else None
        return ModelReply(
            text=text,
            model=completion.model,
            stop_reason=stop,
            tokens_in=usage.prompt_tokens if usage else 0,  # cached tokens included
            tokens_out=usage.completion_tokens if usage else 0,
            tokens_cached=(details.cached_tokens or 0) if details else 0,
        )

    def _translate(
        self, e: BaseException, mode: str
    ) -> ModelError | ModelRejected | _FormatRefused:
        where = f"models.{self.name} (openai {self.cfg.model})"
        if isinstance(e, TimeoutError):
            return ModelError(f"{where}: no reply within {self.cfg.timeout_s:g} s", timed_out=True)
        if isinstance(e, openai.APIConnectionError):  # APITimeoutError included
            timed_out = isinstance(e, openai.APITimeoutError)
            kind = f"timed out after {self.cfg.timeout_s:g} s" if timed_out else "connection failed"
            return ModelError(f"{where}: {kind}", timed_out=timed_out)
        if not isinstance(e, openai.APIStatusError):
            return ModelError(f"{where}: unexpected response ({type(e).__name__})")
        status = e.status_code
        detail = redact(error_detail(e.body) or _plain_detail(e.body), self._key)
        said = f"HTTP {status}" + (f", {detail}" if detail else "")
        log.debug("llm.error", provider="openai", status=status, request_id=e.request_id)
        refusal = formats.read_refusal(
            status, redact(formats.body_text(e.body, e.message), self._key)
        )
        if refusal.reason == "transient":
            label = "rate limited" if status == 429 else "temporarily unavailable"
            wait = retry_after_s(e.response.headers)
            return ModelError(f"{where}: {label} ({said})", retry_after_s=wait)
        fix = formats.advice(
            refusal, f"models.{self.name}", self.cfg.api_key_env, self.cfg.context_tokens
        )
        rejected = ModelRejected(
            f"{where}: {fix} ({said})", reason=refusal.reason, cause=said, fix=fix,
            context_tokens=refusal.context_tokens,
        )  # fmt: skip
        if refusal.reason == "format" and self.cfg.structured_output == "auto":
            return _FormatRefused(rejected)
        return rejected


class _FormatRefused(Exception):
    """The server refused this structured-output mode: the probe tries the next one."""

    def __init__(self, error: ModelRejected) -> None:
        super().__init__(str(error))
        self.error = error


def _plain_detail(body: object) -> str:
    """A body that is not `{"error": {...}}` (FastAPI's `{"detail": ...}`, plain text), cut."""
    if body is None:
        return ""
    text = body if isinstance(body, str) else formats.body_text(body).strip()
    return text[:STATUS_DETAIL_CHARS]


# ── strict mode ──────────────────────────────────────────────────────────────────────────────────

# Keywords strict mode accepts, by the type they apply to. Anything else is either dropped
# (`default`: rejected, and meaningless once every property is required) or, when it tells the
# model something (maxLength, minLength, …), moved into the description as a hint.
_KEEP = {
    "type", "description", "title", "enum", "anyOf", "$ref", "$defs", "properties", "required",
    "additionalProperties", "items", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
}  # fmt: skip
# Kept for compatible servers (their grammar converters enforce them); hints for OpenAI's API.
_LENGTHS = frozenset({"maxLength", "minLength"})
# …up to this length: llama.cpp's converter spells maxLength N as N nested optional characters,
# and llama-cpp-python 0.3 fails to parse the grammar of a 4,000-character limit (and then drops
# the connection). A longer limit stays a hint; agentd's validation enforces it.
GRAMMAR_MAX_LENGTH = 300
_DROP = {"default", "examples", "$schema", "discriminator", "const", "oneOf", "allOf"}
_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def strict_schema(schema: JSON, *, keep_lengths: bool = False) -> JSON:
    """The menu schema rewritten for OpenAI's strict structured outputs (a new dict).

    - `oneOf` becomes `anyOf`; a one-item `allOf` is inlined; `const` becomes a one-value `enum`.
    - Every object is closed (`additionalProperties: false`) and lists all its properties in
      `required`. A property that was optional stays of its own type rather than becoming
      nullable: the model then has to pick a value, any of which validates — whereas a `null`
      would fail the menu's validation (`method: null` is not an allowed method).
    - An open map (`dict[str, …]`) cannot be expressed, so it becomes the empty object.
    - A `$ref` loses its sibling keywords (strict mode rejects them).
    - Properties that pin one value (the action's `kind`) come first in each object: strict mode
      tells `anyOf` members apart by their first key.
    """
    strict: JSON = _strict(schema, _KEEP | _LENGTHS if keep_lengths else _KEEP)
    return strict


def _strict(node: Any, keep: frozenset[str] | set[str]) -> Any:
    if isinstance(node, list):
        return [_strict(n, keep) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return {"$ref": node["$ref"]}
    node = dict(node)
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        inner = node.pop("allOf")[0]
        node = {**inner, **node} if isinstance(inner, dict) else node
        if "$ref" in node:
            return {"$ref": node["$ref"]}
    out: dict[str, Any] = {}
    if "const" in node:
        out["enum"] = [node["const"]]
    if "oneOf" in node:
        out["anyOf"] = _strict(node["oneOf"], keep)
    hints: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "required", "additionalProperties"):
            continue  # rebuilt below for objects
        if key == "format" and value not in _FORMATS:
            hints[key] = value
        elif key in ("$defs", "anyOf", "items"):
            out[key] = (
                {k: _strict(v, keep) for k, v in value.items()}
                if key == "$defs"
                else _strict(value, keep)
            )
        elif key in _LENGTHS and isinstance(value, int) and value > GRAMMAR_MAX_LENGTH:
            hints[key] = value
        elif key in keep:
            out[key] = value
        elif key not in _DROP:
            hints[key] = value
    if out.get("type") == "object" or "properties" in node:
        props = {k: _strict(v, keep) for k, v in node.get("properties", {}).items()}
        pinned = [
            k for k, v in props.items() if isinstance(v.get("enum"), list) and len(v["enum"]) == 1
        ]
        order = pinned + [k for k in props if k not in pinned]
        out["properties"] = {k: props[k] for k in order}
        out["required"] = order
        out["additionalProperties"] = False
    if hints:
        note = ", ".join(f"{k}: {v}" for k, v in hints.items())
        out["description"] = (
            f"{out['description']} " if out.get("description") else ""
        ) + f"({note})"
    return out
