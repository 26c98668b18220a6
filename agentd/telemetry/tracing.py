"""OpenTelemetry traces (optional: `[tracing] enabled`). Off, every call here is a no-op and the
exporter is never imported.

On: one trace per run — its trace id derived from the database's id and the run id, so the steps
of a run driven by several daemons, or across restarts, land in one trace — whose root span
`run` is sent when the run ends; a span per step (`step observe`, `step act` …) under it; model
calls as GenAI spans (`chat MODEL`: gen_ai.* attributes, tokens, never the prompt unless
`capture_prompts`); actions and notifications as child spans. A step resumed after an approval
links to the step that asked (a link: the days between are no span). Outgoing HTTP actions and
webhooks carry `traceparent`.

A span here is a small record (`Span`) the loop fills and appends to a bounded deque: no SDK
object, lock or processor per span. One export thread (agentd/telemetry/otel.py) wakes rarely,
encodes a batch as OTLP protobuf and posts it; a full queue or a dead collector drops spans, which
is logged once and counted, and never slows a step.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any

import structlog

log = structlog.get_logger("agentd.telemetry")
RUNS_CACHED = 4096  # runs whose root ids are kept (a few dozen bytes each)
INTERNAL, CLIENT = 1, 3  # OTLP's SpanKind values
# The span whose children new spans are: (trace id, span id), or None outside any span.
_current: ContextVar[tuple[int, int] | None] = ContextVar("agentd_span", default=None)


def _derived(size: int, *parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:size], "big") or 1


class Span:
    """One span as the exporter encodes it; the methods the callers use of an SDK span."""

    __slots__ = ("attributes", "end", "error", "kind", "links", "name", "parent_id", "sink",
                 "span_id", "start", "token", "trace_id")  # fmt: skip

    def __init__(self, trace_id: int, span_id: int, parent_id: int, name: str,
                 attributes: dict[str, Any], kind: int = INTERNAL,
                 links: Sequence[tuple[int, int]] = (), start: int = 0) -> None:  # fmt: skip
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id  # 0: a root
        self.name = name
        self.attributes = attributes
        self.kind = kind
        self.links = links  # (trace id, span id) of earlier spans
        self.start = start or time.time_ns()
        self.end = 0
        self.error: str | None = None
        self.sink: Any = None  # set by Tracing: where the span goes as its block ends
        self.token: Any = None

    def __enter__(self) -> Span:
        """The current span while the block runs (its children's parent, the traceparent)."""
        self.token = _current.set((self.trace_id, self.span_id))
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        _current.reset(self.token)
        self.end = time.time_ns()
        if error is not None:
            self.error = f"{type(error).__name__}: {error}"[:300]
        self.sink.put(self)

    def update_name(self, name: str) -> None:
        self.name = name

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        self.attributes.update(attributes)

    def get_span_context(self) -> Span:
        return self  # it has trace_id and span_id, as an SDK SpanContext does


class Tracing:
    """The daemon's tracer; `Tracing.off()` does nothing (the default in `Deps`)."""

    def __init__(self, sink: Any = None, *, capture_prompts: bool = False, db_id: str = "") -> None:
        self.sink = sink  # agentd/telemetry/otel.py's Exporter: put(span), stop(timeout)
        self.capture_prompts = capture_prompts
        self.db_id = db_id
        self._runs: dict[int, tuple[int, int]] = {}  # run id → (trace id, root span id)

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @property
    def on(self) -> bool:
        return self.sink is not None

    @classmethod
    def start(cls, cfg: Any, meter: Any) -> Tracing:
        """From the `[tracing]` table (its export thread starts here)."""
        if not cfg.enabled:
            return cls.off()
        from agentd.telemetry import otel

        return cls(otel.Exporter(cfg, meter.dropped_spans.inc), capture_prompts=cfg.capture_prompts)

    # ── spans ──────────────────────────────────────────────────────────────────────────────────
    def _run_ids(self, run_id: int) -> tuple[int, int]:
        """The run's trace id and its root span's id (derived: any daemon names the same)."""
        found = self._runs.get(run_id)
        if found is None:
            if len(self._runs) >= RUNS_CACHED:
                self._runs.clear()
            found = self._runs[run_id] = (_derived(16, self.db_id, "run", run_id),
                                          _derived(8, self.db_id, "run-span", run_id))  # fmt: skip
        return found

    def step_span_id(self, run_id: int, seq: int) -> int:
        return _derived(8, self.db_id, "step", run_id, seq)

    def step(
        self, run_id: int, goal_id: int, first_seq: int, links: Sequence[int] = ()
    ) -> AbstractContextManager[Span | None]:
        """A span for the step(s) one advance takes (its id derived from the first new seq, so a
        later step can link to it); `links` are earlier steps' seqs (an approval's asking step)."""
        if self.sink is None:
            return contextlib.nullcontext()
        trace_id, root = self._run_ids(run_id)
        span = Span(trace_id, self.step_span_id(run_id, first_seq), root, "step",
                    {"agentd.run_id": run_id, "agentd.goal_id": goal_id, "agentd.seq": first_seq},
                    links=[(trace_id, self.step_span_id(run_id, s)) for s in links])  # fmt: skip
        span.sink = self.sink
        return span

    def run_ended(
        self, run_id: int, goal_id: int, agent: str, status: str, started_at: float
    ) -> None:
        """The run's root span, sent once when it ends (start: the run's creation)."""
        if self.sink is None:
            return
        trace_id, root = self._run_ids(run_id)
        span = Span(trace_id, root, 0, "run",
                    {"agentd.run_id": run_id, "agentd.goal_id": goal_id, "agentd.agent": agent,
                     "agentd.run.status": status}, start=int(started_at * 1e9))  # fmt: skip
        span.end = time.time_ns()
        self.sink.put(span)
        self._runs.pop(run_id, None)

    def _child(self, name: str, attributes: dict[str, Any], kind: int = INTERNAL) -> Span:
        parent = _current.get()
        trace_id, parent_id = parent if parent is not None else (random.getrandbits(128) or 1, 0)
        span = Span(trace_id, random.getrandbits(64) or 1, parent_id, name, attributes, kind)
        span.sink = self.sink
        return span

    def child(self, name: str, **attributes: Any) -> AbstractContextManager[Span | None]:
        """A child of the current span (an action, a notification); nothing when off."""
        if self.sink is None:
            return contextlib.nullcontext()
        return self._child(name, {k: v for k, v in attributes.items() if v is not None})

    def model_call(
        self, provider: str, model: str, purpose: str, prompt: str
    ) -> AbstractContextManager[Span | None]:
        """A GenAI client span (semantic conventions: `chat MODEL`, gen_ai.* attributes)."""
        if self.sink is None:
            return contextlib.nullcontext()
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                      "gen_ai.system": provider, "gen_ai.request.model": model,
                      "agentd.purpose": purpose}  # fmt: skip
        if self.capture_prompts:
            attributes["gen_ai.input.messages"] = prompt[:8000]
        return self._child(f"chat {model}", attributes, CLIENT)

    def traceparent(self) -> str | None:
        """The W3C `traceparent` of the current span (None: off, or no span)."""
        return current_traceparent() if self.sink is not None else None

    def stop(self, timeout_s: float = 2.0) -> None:
        """Send what is queued (bounded by `timeout_s`), then end the export thread (blocking:
        call it on a thread)."""
        if self.sink is not None:
            self.sink.stop(timeout_s)


def current_traceparent() -> str | None:
    """The W3C `traceparent` of the current span, for an outgoing request (a webhook); None when
    no span is current (tracing off, or outside any span)."""
    current = _current.get()
    if current is None:
        return None
    return f"00-{current[0]:032x}-{current[1]:016x}-01"
