"""The OpenTelemetry SDK behind agentd/telemetry/tracing.py (imported only with `[tracing]
enabled`; an ImportError here means the `tracing` extra is missing): the provider, its bounded
batch queue, and an exporter that reports a dead collector once instead of at every batch."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from agentd.telemetry.tracing import given_span_id, given_trace_id, quiet_sdk_loggers

log = structlog.get_logger("agentd.telemetry")


class _OnceExporter(SpanExporter):
    """The OTLP exporter, whose failures are counted (spans dropped) and logged once per outage:
    `tracing.export_failed` at the first, `tracing.export_recovered` when a batch goes again."""

    def __init__(self, inner: SpanExporter, endpoint: str, on_drop: Callable[[int], None]) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.on_drop = on_drop
        self.failing = False
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as e:  # the SDK's thread: an exception would end it
            result = SpanExportResult.FAILURE
            error = f"{type(e).__name__}: {e}"
        else:
            error = "the collector refused or did not answer"
        with self.lock:
            if result == SpanExportResult.SUCCESS:
                if self.failing:
                    log.info("tracing.export_recovered", endpoint=self.endpoint)
                self.failing = False
                return result
            self.on_drop(len(spans))
            if not self.failing:
                self.failing = True
                log.warning("tracing.export_failed", endpoint=self.endpoint, error=error[:300],
                            note="spans are dropped until the collector answers; steps go on")  # fmt: skip
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class _Ids(RandomIdGenerator):
    """Span and trace ids derived by agentd/telemetry/tracing.py when it set them (a step's, a
    run's: links and the run's root name them), else random."""

    def generate_span_id(self) -> int:
        given = given_span_id()
        return given if given is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        given = given_trace_id()
        return given if given is not None else super().generate_trace_id()


class _QueueFull(logging.Handler):
    """The SDK logs "Queue full, dropping span." for each span a full queue drops (on the thread
    that ended it): counted, and said once per daemon instead of once per span."""

    def __init__(self, on_drop: Callable[[int], None]) -> None:
        super().__init__(logging.WARNING)
        self.on_drop = on_drop
        self.told = False

    def emit(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith("Queue full"):
            return
        self.on_drop(1)
        if not self.told:
            self.told = True
            log.warning("tracing.queue_full", note="spans are dropped while the exporter falls "
                        "behind (agentd_trace_spans_dropped_total counts them); steps go on")  # fmt: skip


def provider(cfg: Any, on_drop: Callable[[int], None]) -> TracerProvider:
    quiet_sdk_loggers()
    queue_log = logging.getLogger("opentelemetry.sdk._shared_internal")
    queue_log.setLevel(logging.WARNING)
    queue_log.propagate = False  # its other messages: the export failures we say once
    for old in [h for h in queue_log.handlers if isinstance(h, _QueueFull)]:
        queue_log.removeHandler(old)
    queue_log.addHandler(_QueueFull(on_drop))
    resource = Resource.create({"service.name": cfg.service_name})
    tracer_provider = TracerProvider(resource=resource, id_generator=_Ids())
    inner = OTLPSpanExporter(endpoint=cfg.endpoint, timeout=cfg.timeout_s)
    exporter = _OnceExporter(inner, cfg.endpoint, on_drop)
    processor = BatchSpanProcessor(
        exporter, max_queue_size=cfg.queue_size, schedule_delay_millis=500,
        max_export_batch_size=min(512, cfg.queue_size), export_timeout_millis=cfg.timeout_s * 1000,
    )  # fmt: skip
    tracer_provider.add_span_processor(processor)
    return tracer_provider
