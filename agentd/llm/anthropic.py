"""The `anthropic` provider: Claude through the Messages API, the menu as structured output.

One request per decision — the system text, one user message, and `output_config.format` carrying
the menu's JSON schema (no tools). The raw reply text goes back to the engine, which journals it
before `agentd.harness.menu` validates it. SDK exceptions are translated here: worth a durable retry →
ModelError, refused → ModelRejected. No message ever contains the API key.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import anthropic
import structlog
from anthropic.types import Message, TextBlock

from agentd import config
from agentd.config import AnthropicModel
from agentd.errors import ModelError, ModelRejected
from agentd.llm import (
    ModelReply,
    ModelRequest,
    error_detail,
    formats,
    log_completed,
    redact,
    retry_after_s,
)

if TYPE_CHECKING:
    import httpx2

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Anthropic's stop reasons in the engine's words: "end", "max_tokens" (cut off), "refusal".
STOP_REASONS = {
    "end_turn": "end",
    "stop_sequence": "end",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}

# HTTP statuses worth a durable retry; every other 4xx is a request retrying cannot fix.


class AnthropicProvider:
    """A Model backed by `anthropic.AsyncAnthropic`; the client is built on first use, so a
    missing key stops the run that needs it rather than the daemon."""

    def __init__(
        self, name: str, cfg: AnthropicModel, http_client: httpx2.AsyncClient | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self._http_client = http_client
        self._client: anthropic.AsyncAnthropic | None = None
        self._key: str | None = None  # kept only to scrub it from vendor messages

    async def aclose(self) -> None:
        """Close the SDK client's connection pool (for shutdown or a config reload)."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            key = config.secret(self.cfg.api_key_env)
            if key is None:
                raise ModelRejected(
                    f"models.{self.name}: ${self.cfg.api_key_env} is not set in the daemon's "
                    "environment; set it (or change api_key_env) and restart the daemon"
                )
            self._key = key
            self._client = anthropic.AsyncAnthropic(
                api_key=key,
                # Explicit, so ANTHROPIC_BASE_URL cannot silently send the key elsewhere.
                base_url=self.cfg.base_url or DEFAULT_BASE_URL,
                # No SDK retries: it would sleep out any Retry-After inside this await (an hour,
                # if the server says so). The engine backs off durably instead.
                max_retries=0,
                timeout=self.cfg.timeout_s,
                http_client=self._http_client,
            )
        return self._client

    async def complete(self, request: ModelRequest) -> ModelReply:
        client = self._sdk()
        try:
            schema = anthropic.transform_schema(dict(request.schema))
        except ValueError as e:
            raise ModelRejected(f"models.{self.name}: menu schema not accepted: {e}") from None
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                message = await client.messages.create(
                    model=self.cfg.model,
                    max_tokens=max(self.cfg.max_tokens, request.max_tokens or 0),
                    # The system text is the stable prefix: mark it for the prompt cache (ignored
                    # while it is shorter than the model's minimum cacheable length).
                    system=[
                        {
                            "type": "text",
                            "text": request.system,
                            "cache_control": {"type": "ephemeral"},
                        }
                    ],
                    messages=[{"role": "user", "content": request.prompt}],
                    output_config={"format": {"type": "json_schema", "schema": schema}},
                )
        except (anthropic.AnthropicError, TimeoutError) as e:
            failure = self._translate(e)
        else:
            reply = self._reply(message)
            log_completed("anthropic", reply, started)
            return reply
        # Raised outside the handler: no chained SDK exception (which holds the request and its
        # auth header) travels with ours into logs or tracebacks.
        raise failure

    def _reply(self, message: Message) -> ModelReply:
        text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
        stop = STOP_REASONS.get(message.stop_reason or "", message.stop_reason or "end")
        if stop == "refusal" and not text and message.stop_details is not None:
            text = message.stop_details.explanation or ""
        usage = message.usage
        cached = usage.cache_read_input_tokens or 0
        return ModelReply(
            text=text,
            model=message.model,
            stop_reason=stop,
            # All input tokens, cached ones included (Anthropic reports the three parts apart);
            # the engine prices tokens_in - tokens_cached at the fresh rate.
            tokens_in=usage.input_tokens + cached + (usage.cache_creation_input_tokens or 0),
            tokens_out=usage.output_tokens,
            tokens_cached=cached,
        )

    def _translate(self, e: BaseException) -> ModelError | ModelRejected:
        where = f"models.{self.name} (anthropic {self.cfg.model})"
        if isinstance(e, TimeoutError):
            return ModelError(f"{where}: no reply within {self.cfg.timeout_s:g} s", timed_out=True)
        if isinstance(e, anthropic.APIConnectionError):  # APITimeoutError included
            timed_out = isinstance(e, anthropic.APITimeoutError)
            kind = "timed out" if timed_out else "connection failed"
            return ModelError(f"{where}: {kind}", timed_out=timed_out)
        if not isinstance(e, anthropic.APIStatusError):
            return ModelError(f"{where}: unexpected response ({type(e).__name__})")
        status = e.status_code
        detail = redact(error_detail(e.body), self._key)
        said = f"HTTP {status}" + (f", {detail}" if detail else "")
        log.debug("llm.error", provider="anthropic", status=status, request_id=e.request_id)
        refusal = formats.read_refusal(
            status, redact(formats.body_text(e.body, e.message), self._key)
        )
        if refusal.reason == "transient":
            wait = retry_after_s(e.response.headers)
            return ModelError(f"{where}: {_retry_label(status)} ({said})", retry_after_s=wait)
        fix = formats.advice(refusal, f"models.{self.name}", self.cfg.api_key_env, None)
        return ModelRejected(
            f"{where}: {fix} ({said})", reason=refusal.reason, cause=said, fix=fix,
            context_tokens=refusal.context_tokens,
        )  # fmt: skip


def _retry_label(status: int) -> str:
    return {429: "rate limited", 529: "overloaded"}.get(status, "temporarily unavailable")
