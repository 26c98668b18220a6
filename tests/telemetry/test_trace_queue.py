"""A full span queue drops spans without slowing the step that ends them: counted in
`agentd_trace_spans_dropped_total`, and `tracing.queue_full` is logged once, not per span."""

from __future__ import annotations

from structlog.testing import capture_logs

from agentd.config import TracingConfig
from agentd.telemetry.meter import Meter
from agentd.telemetry.tracing import Tracing
from tests.telemetry.prom_server import free_port


def test_a_full_queue_drops_spans_counts_them_and_says_so_once() -> None:
    meter = Meter()
    dead = f"http://127.0.0.1:{free_port()}/v1/traces"
    cfg = TracingConfig(enabled=True, endpoint=dead, queue_size=16, timeout_s=0.5)
    tracing = Tracing.start(cfg, meter)
    try:
        with capture_logs() as logs:
            for seq in range(2, 400):
                with tracing.step(1, 1, seq), tracing.child("action noop"):
                    pass
    finally:
        tracing.stop(timeout_s=0.5)
    assert meter.dropped_spans._value.get() > 0
    assert [e["event"] for e in logs].count("tracing.queue_full") == 1
