"""What an OpenAI-compatible server accepts and what its refusals mean, without the SDK: the
structured-output modes (in probing order), the request body of each, and the reading of an error
body as an outage to retry or a refusal for the operator (with its cause and its fix).

Refusals this reads (tests/fixtures/llama_cpp_python/): llama-cpp-python 0.3 answers an unknown
`response_format.type` with HTTP 500 and a validation error naming the field; a prompt past the
context with HTTP 400 "This model's maximum context length is N tokens…" (llama_cpp/server/errors.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agentd.models import JSON

# Probing order for structured_output = "auto": the most widely honoured first.
MODES = ("json_schema", "json_object", "prompt")

PROMPT_SCHEMA_NOTE = (
    "Reply with ONE JSON object and nothing else (no prose, no Markdown fence). It must "
    "validate against this JSON schema:\n"
)


def response_format(mode: str, name: str, schema: JSON) -> JSON | None:
    """The `response_format` of one mode (None: the schema goes in the prompt instead)."""
    if mode == "json_schema":
        inner = {"name": name, "schema": schema, "strict": True}
        return {"type": "json_schema", "json_schema": inner}
    if mode == "json_object":  # llama-cpp-python turns the schema into a grammar
        return {"type": "json_object", "schema": schema}
    return None


def system_for(mode: str, system: str, schema: JSON) -> str:
    """The system text of one mode: in "prompt" mode it carries the schema itself."""
    if mode != "prompt":
        return system
    return f"{system}\n\n{PROMPT_SCHEMA_NOTE}{json.dumps(schema, separators=(',', ':'))}"


# ── refusals by meaning ──────────────────────────────────────────────────────────────────────────

_CONTEXT = re.compile(
    r"context[ _](length|window|size)|maximum context|n_ctx|prompt is too long|too many tokens"
    r"|exceeds? (the )?(available )?context",
    re.IGNORECASE,
)
_CONTEXT_SIZE = re.compile(
    r"(?:maximum context length is|context window of|n_ctx[^0-9]{0,12}|context size[^0-9]{0,12})"
    r"\s*\(?(\d{3,7})",
    re.IGNORECASE,
)
_FORMAT = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
# A validation error about the request body: FastAPI/pydantic locations and messages.
_REQUEST_FIELD = re.compile(
    r"'body'|\bbody\.|validation error|literal_error|Input should be|Field required"
    r"|extra_forbidden|unrecognized (request )?argument|invalid_request_error"
    r"|max_(completion_)?tokens",
    re.IGNORECASE,
)
_UNKNOWN_MODEL = re.compile(
    r"model[^.]{0,80}(not found|does not exist|unknown|not loaded)|no such model|model_not_found",
    re.IGNORECASE,
)
RETRY_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Refusal:
    """An error answer read by meaning. `reason`: "transient" (retry later), "format" (the
    server does not take this response_format), "context" (the prompt did not fit), "auth",
    "model" (unknown model), "request" (the server refuses the request as invalid)."""

    reason: str
    context_tokens: int | None = None  # the server's context, when its message says it


def body_text(body: object, message: str = "") -> str:
    """An error body as one searchable text (dicts as JSON), with the SDK's message."""
    text = body if isinstance(body, str) else json.dumps(body, default=str) if body else ""
    return f"{message} {text}"


def read_refusal(status: int, text: str) -> Refusal:
    """What an HTTP error status with this body means for the caller."""
    if status in (401, 403):
        return Refusal("auth")
    if _CONTEXT.search(text):  # at any status: a prompt past the context is no outage
        size = _CONTEXT_SIZE.search(text)
        return Refusal("context", int(size.group(1)) if size else None)
    if status in RETRY_STATUSES:
        return Refusal("transient")
    if _FORMAT.search(text) and (status < 500 or _REQUEST_FIELD.search(text)):
        return Refusal("format")
    if status == 404 or _UNKNOWN_MODEL.search(text):
        return Refusal("model")
    if status < 500 or _REQUEST_FIELD.search(text):
        return Refusal("request")
    return Refusal("transient")


def advice(refusal: Refusal, where: str, key_env: str | None, ctx_setting: int | None) -> str:
    """The fix for one refusal, in the operator's words (the cause comes from the server)."""
    if refusal.reason == "auth":
        return f"the API key in ${key_env} was refused; check or replace it"
    if refusal.reason == "model":
        return "the server does not know this model; check `model` (and `base_url`)"
    if refusal.reason == "format":
        return (
            "the server refused the structured-output format; set structured_output to "
            '"json_object" or "prompt" (or "auto" to probe)'
        )
    if refusal.reason == "context":
        size = refusal.context_tokens or ctx_setting
        said = f"{size}-token context" if size else "context"
        return (
            f"the prompt did not fit the model's {said}; set {where}.context_tokens"
            f"{f' = {size}' if size else ''} so prompts are cut to fit, lower the agent's "
            "limits.history_steps, or give the server a larger context (llama-cpp-python "
            "--n_ctx, llama-server -c, Ollama num_ctx)"
        )
    return (
        "the server refused the request as invalid; check the model's settings "
        "(max_tokens, structured_output) against the server's documentation"
    )
