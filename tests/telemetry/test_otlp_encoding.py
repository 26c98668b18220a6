"""agentd/telemetry/otel.py writes OTLP protobuf by hand: opentelemetry-proto decodes it to the same
spans (ids, parent, kind, times, every attribute type, links, an error status), and the export
thread sends queued spans in one batch, not a request per span."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentd.config import TracingConfig
from agentd.telemetry import otel
from agentd.telemetry.meter import Meter
from agentd.telemetry.tracing import CLIENT, Span, Tracing
from tests.telemetry.otlp_receiver import Receiver


def test_the_hand_written_protobuf_decodes_to_the_same_spans() -> None:
    attrs = {"s": "héllo", "i": -7, "big": 2**62, "f": 0.25, "b": True, "no": False, "none": None}
    span = Span(2**127 + 5, 2**63 + 9, 42, "chat m", attrs, CLIENT, links=[(3, 4)], start=10)
    span.end, span.error = 2**62, "ValueError: boom"
    root = Span(2**127 + 5, 42, 0, "run", {"agentd.run_id": 1}, start=1)
    root.end = 2

    request = ExportTraceServiceRequest()
    request.ParseFromString(otel.encode("svc", [span, root]))

    (rs,) = request.resource_spans
    assert [(a.key, a.value.string_value) for a in rs.resource.attributes] == [
        ("service.name", "svc")
    ]
    (ss,) = rs.scope_spans
    assert ss.scope.name == "agentd"
    got, got_root = ss.spans
    assert int.from_bytes(got.trace_id, "big") == 2**127 + 5
    assert int.from_bytes(got.span_id, "big") == 2**63 + 9
    assert int.from_bytes(got.parent_span_id, "big") == 42 and got_root.parent_span_id == b""
    assert (got.name, got.kind) == ("chat m", CLIENT)
    assert (got.start_time_unix_nano, got.end_time_unix_nano) == (10, 2**62)
    values = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in got.attributes}
    assert values == {k: v for k, v in attrs.items() if v is not None}
    (link,) = got.links
    assert (int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big")) == (3, 4)
    assert (got.status.code, got.status.message) == (2, "ValueError: boom")
    assert got_root.status.code == 0


def test_queued_spans_leave_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "FLUSH_S", 3600.0)  # however slow the loop: no timed wake here
    receiver = Receiver()
    tracing = Tracing.start(TracingConfig(enabled=True, endpoint=receiver.url), Meter())
    try:
        for seq in range(2, 102):
            with tracing.step(1, 1, seq), tracing.child("action noop"):
                pass
    finally:
        tracing.stop(timeout_s=10)
        receiver.stop()
    assert len(receiver.spans) == 200
    assert receiver.requests == 1  # the thread woke once (at stop), not per span


def test_a_span_whose_block_raises_is_sent_with_the_error_and_its_parent() -> None:
    class Sink:
        def __init__(self) -> None:
            self.spans: list[Span] = []

        def put(self, span: Span) -> None:
            self.spans.append(span)

    sink = Sink()
    tracing = Tracing(sink)
    with pytest.raises(ValueError), tracing.step(1, 2, 3) as step, tracing.child("action x"):
        raise ValueError("boom")
    assert tracing.traceparent() is None  # outside every span again
    action, ended = sink.spans
    assert step is ended and action.parent_id == ended.span_id
    assert action.error == ended.error == "ValueError: boom"
