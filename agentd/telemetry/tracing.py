"""OpenTelemetry traces (optional: `[tracing] enabled`, the `tracing` extra). Off, every call here
is a no-op that imports nothing.

On: one trace per run — its trace id derived from the database's id and the run id, so the steps
of a run driven by several daemons, or across restarts, land in one trace — whose root span
`run` is sent when the run ends; a span per step (`step observe`, `step act` …) under it; model
calls as GenAI spans (`chat MODEL`: gen_ai.* attributes, tokens, never the prompt unless
`capture_prompts`); actions and notifications as child spans. A step resumed after an approval
links to the step that asked (a link: the days between are no span). Outgoing HTTP actions and
webhooks carry `traceparent`. Spans leave through a bounded queue on the SDK's own thread: a full
queue or a dead collector drops spans, which is logged once and counted, and never slows a step.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import structlog

log = structlog.get_logger("agentd.telemetry")
RUNS_CACHED = 4096  # runs whose root context is kept (a few hundred bytes each)
# The ids the next span takes (a step's, a run's: derived, so links and parents can name them).
_span_id: ContextVar[int | None] = ContextVar("agentd_span_id", default=None)
_trace_id: ContextVar[int | None] = ContextVar("agentd_trace_id", default=None)


def _derived(size: int, *parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:size], "big") or 1


class Tracing:
    """The daemon's tracer; `Tracing.off()` does nothing (the default in `Deps`)."""

    def __init__(self, provider: Any = None, tracer: Any = None, *, capture_prompts: bool = False,
                 db_id: str = "") -> None:  # fmt: skip
        self.provider = provider
        self.tracer = tracer
        self.capture_prompts = capture_prompts
        self.db_id = db_id
        self.broken = False  # a tracing error was logged
        self._runs: dict[int, Any] = {}  # run id → its root's context (`_run_context`)

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @property
    def on(self) -> bool:
        return self.tracer is not None

    @classmethod
    def start(cls, cfg: Any, meter: Any) -> Tracing:
        """From the `[tracing]` table; off (with one warning) when the extra is not installed."""
        if not cfg.enabled:
            return cls.off()
        try:
            from agentd.telemetry import otel
        except ImportError as e:
            hint = "[tracing] enabled needs the extra: pip install 'agentd-daemon[tracing]'"
            log.warning("tracing.unavailable", error=str(e), note=hint)
            return cls.off()
        provider = otel.provider(cfg, lambda n: _dropped(meter, n))
        return cls(provider, provider.get_tracer("agentd"), capture_prompts=cfg.capture_prompts)

    # ── spans ──────────────────────────────────────────────────────────────────────────────────
    def _run_context(self, run_id: int) -> Any:
        """The context whose span is the run's root (by its derived ids), cached per run."""
        found = self._runs.get(run_id)
        if found is not None:
            return found
        if len(self._runs) >= RUNS_CACHED:
            self._runs.clear()
        found = self._runs[run_id] = self._new_run_context(run_id)
        return found

    def _new_run_context(self, run_id: int) -> Any:
        from opentelemetry import trace

        ctx = trace.SpanContext(
            trace_id=_derived(16, self.db_id, "run", run_id),
            span_id=_derived(8, self.db_id, "run-span", run_id),
            is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )  # fmt: skip
        return trace.set_span_in_context(trace.NonRecordingSpan(ctx))

    def step_span_id(self, run_id: int, seq: int) -> int:
        return _derived(8, self.db_id, "step", run_id, seq)

    @contextlib.contextmanager
    def step(
        self, run_id: int, goal_id: int, first_seq: int, links: Sequence[int] = ()
    ) -> Iterator[Any]:
        """A span for the step(s) one advance takes (its id derived from the first new seq, so a
        later step can link to it); `links` are earlier steps' seqs (an approval's asking step)."""
        if not self.on:
            yield None
            return
        from opentelemetry import trace

        token = _span_id.set(self.step_span_id(run_id, first_seq))
        try:  # the id is taken as the span starts: its children get random ones
            linked = [trace.Link(self._link(run_id, s)) for s in links]
            span = self.tracer.start_span(
                "step", context=self._run_context(run_id), links=linked,
                attributes={"agentd.run_id": run_id, "agentd.goal_id": goal_id, "agentd.seq": first_seq},
            )  # fmt: skip
        except Exception as e:  # tracing never stops a step
            self._failed(e)
            yield None
            return
        finally:
            _span_id.reset(token)
        with trace.use_span(span, end_on_exit=True):
            yield span

    def _link(self, run_id: int, seq: int) -> Any:
        from opentelemetry import trace

        return trace.SpanContext(
            trace_id=_derived(16, self.db_id, "run", run_id),
            span_id=self.step_span_id(run_id, seq), is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )  # fmt: skip

    def run_ended(
        self, run_id: int, goal_id: int, agent: str, status: str, started_at: float
    ) -> None:
        """The run's root span, sent once when it ends (start: the run's creation)."""
        if not self.on:
            return
        from opentelemetry.context import Context

        ids = (_trace_id.set(_derived(16, self.db_id, "run", run_id)),
               _span_id.set(_derived(8, self.db_id, "run-span", run_id)))  # fmt: skip
        try:
            span = self.tracer.start_span(
                "run", context=Context(), start_time=int(started_at * 1e9),
                attributes={"agentd.run_id": run_id, "agentd.goal_id": goal_id,
                            "agentd.agent": agent, "agentd.run.status": status},
            )  # fmt: skip
            span.end()
        except Exception as e:  # tracing never stops a run
            self._failed(e)
        finally:
            _trace_id.reset(ids[0])
            _span_id.reset(ids[1])

    def _failed(self, error: Exception) -> None:
        """A bug or an SDK surprise in tracing: logged once, never raised into a step."""
        if not self.broken:
            self.broken = True
            log.error("tracing.failed", error=repr(error), note="spans may be missing")

    @contextlib.contextmanager
    def child(self, name: str, **attributes: Any) -> Iterator[Any]:
        """A child of the current span (an action, a notification); nothing when off."""
        if not self.on:
            yield None
            return
        with self.tracer.start_as_current_span(name, attributes=_clean(attributes)) as span:
            yield span

    @contextlib.contextmanager
    def model_call(self, provider: str, model: str, purpose: str, prompt: str) -> Iterator[Any]:
        """A GenAI client span (semantic conventions: `chat MODEL`, gen_ai.* attributes)."""
        if not self.on:
            yield None
            return
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                      "gen_ai.system": provider, "gen_ai.request.model": model,
                      "agentd.purpose": purpose}  # fmt: skip
        if self.capture_prompts:
            attributes["gen_ai.input.messages"] = prompt[:8000]
        with self.tracer.start_as_current_span(f"chat {model}", kind=_client(),
                                               attributes=attributes) as span:  # fmt: skip
            yield span

    def traceparent(self) -> str | None:
        """The W3C `traceparent` of the current span (None: off, or no span)."""
        return current_traceparent() if self.on else None

    def stop(self, timeout_s: float = 2.0) -> None:
        """Flush what is queued (bounded), then shut the exporter down (call on a thread)."""
        if self.provider is not None:
            self.provider.force_flush(int(timeout_s * 1000))
            self.provider.shutdown()


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, for an outgoing request (a webhook); None when
    tracing never started in this process (nothing is imported for it) or no span is current."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _client() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def _dropped(meter: Any, n: int) -> None:
    meter.dropped_spans.inc(n)


def given_span_id() -> int | None:
    """The span id the next span takes, if one was derived for it (agentd/telemetry/otel.py)."""
    return _span_id.get()


def given_trace_id() -> int | None:
    return _trace_id.get()


def quiet_sdk_loggers() -> None:
    """The SDK logs each failed export (with tracebacks) through `logging`: we say it once."""
    for name in ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                 "opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk.trace.export"):  # fmt: skip
        logging.getLogger(name).setLevel(logging.CRITICAL)
