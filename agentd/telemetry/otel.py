"""The OTLP/HTTP export behind agentd/telemetry/tracing.py (imported only with `[tracing]
enabled`; it needs no library beyond the standard one).

The loop appends each ended span to a bounded deque (a full one drops the span: counted, said
once) and goes on; one export thread wakes every `FLUSH_S`, or as the deque fills past half,
encodes what is queued as an OTLP `ExportTraceServiceRequest` (opentelemetry-proto) and posts it.
No SDK span, processor or lock per span: a step pays for a small record and an append. A dead
collector is said once per outage (`tracing.export_failed`, then `tracing.export_recovered`).
"""

from __future__ import annotations

import struct
import threading
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from agentd.telemetry.tracing import Span

log = structlog.get_logger("agentd.telemetry")
FLUSH_S = 2.0  # the export thread's rhythm when the queue stays under half full
BATCH = 2048  # spans per request at most

# OTLP's protobuf written by hand (opentelemetry/proto/trace/v1/trace.proto's field numbers): the
# generated classes cost ~80 µs a span to build, this ~10; tests decode it with opentelemetry-proto.


def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # int64: two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or an embedded message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _value(v: Any) -> bytes:
    """An AnyValue: 1 string, 2 bool, 3 int64, 4 double."""
    if isinstance(v, bool):
        return b"\x10" + (b"\x01" if v else b"\x00")
    if isinstance(v, int):
        return b"\x18" + _varint(v)
    if isinstance(v, float):
        return b"\x21" + struct.pack("<d", v)
    return _field(1, str(v).encode())


_KEYS: dict[str, bytes] = {}  # a key's encoded KeyValue.key field (the keys are a few dozen)


def _key(k: str) -> bytes:
    found = _KEYS.get(k)
    if found is None:
        found = _field(1, k.encode())
        if len(_KEYS) < 1024:  # bounded, should a caller ever make keys up
            _KEYS[k] = found
    return found


def _attributes(number: int, attributes: dict[str, Any]) -> bytes:
    """Repeated KeyValue (1 key, 2 value) as field `number`."""
    return b"".join(_field(number, _key(k) + _field(2, _value(v)))
                    for k, v in attributes.items() if v is not None)  # fmt: skip


def _span(s: Span) -> bytes:
    out = [b"\x0a\x10", s.trace_id.to_bytes(16, "big"), b"\x12\x08", s.span_id.to_bytes(8, "big")]
    if s.parent_id:
        out += [b"\x22\x08", s.parent_id.to_bytes(8, "big")]
    out += [_field(5, s.name.encode()), b"\x30", _varint(s.kind),
            struct.pack("<BQBQ", 0x39, s.start, 0x41, s.end), _attributes(9, s.attributes)]  # fmt: skip
    for trace_id, span_id in s.links:  # Span.Link: 1 trace id, 2 span id
        out.append(_field(13, b"\x0a\x10" + trace_id.to_bytes(16, "big")
                              + b"\x12\x08" + span_id.to_bytes(8, "big")))  # fmt: skip
    if s.error is not None:  # Status: 2 message, 3 code (2: error)
        out.append(_field(15, _field(2, s.error.encode()) + b"\x18\x02"))
    return b"".join(out)


def encode(service: str, spans: Iterable[Span]) -> bytes:
    """One OTLP ExportTraceServiceRequest for `spans`: one ResourceSpans (its Resource naming
    the service), one ScopeSpans (scope `agentd`)."""
    resource = _field(1, _attributes(1, {"service.name": service}))
    scope = _field(1, _field(1, b"agentd")) + b"".join(_field(2, _span(s)) for s in spans)
    return _field(1, resource + _field(2, scope))


class Exporter:
    """The bounded span queue and its one export thread (started here, ended by `stop`)."""

    def __init__(self, cfg: Any, on_drop: Callable[[int], None]) -> None:
        self.endpoint: str = cfg.endpoint
        self.service: str = cfg.service_name
        self.timeout_s: float = cfg.timeout_s
        self.capacity: int = cfg.queue_size
        self.on_drop = on_drop
        self.queue: deque[Span] = deque()
        self.wake = threading.Event()
        self.stopping = False
        self.failing = False
        self.told_full = False
        self.thread = threading.Thread(target=self._run, name="agentd-trace-export", daemon=True)
        self.thread.start()

    def put(self, span: Span) -> None:
        """Queue an ended span (the loop's side: an append; never waits)."""
        queued = len(self.queue)
        if queued >= self.capacity:
            self.on_drop(1)
            if not self.told_full:
                self.told_full = True
                log.warning("tracing.queue_full", note="spans are dropped while the exporter falls "
                            "behind (agentd_trace_spans_dropped_total counts them); steps go on")  # fmt: skip
            return
        self.queue.append(span)
        if queued == self.capacity // 2:
            self.wake.set()

    def _run(self) -> None:
        while not self.stopping:
            self.wake.wait(FLUSH_S)
            self.wake.clear()
            self._drain()

    def _drain(self) -> None:
        while self.queue:
            batch = [self.queue.popleft() for _ in range(min(len(self.queue), BATCH))]
            try:
                self._post(encode(self.service, batch))
            except Exception as e:  # the thread must not end: count, say once, go on
                self._failed(len(batch), f"{type(e).__name__}: {e}")
                continue
            if self.failing:
                self.failing = False
                log.info("tracing.export_recovered", endpoint=self.endpoint)

    def _post(self, body: bytes) -> None:
        headers = {"Content-Type": "application/x-protobuf"}  # the endpoint is http(s): config
        request = urllib.request.Request(self.endpoint, body, headers, method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # noqa: S310
            answer.read()

    def _failed(self, n: int, error: str) -> None:
        self.on_drop(n)
        if not self.failing:
            self.failing = True
            log.warning("tracing.export_failed", endpoint=self.endpoint, error=error[:300],
                        note="spans are dropped until the collector answers; steps go on")  # fmt: skip

    def stop(self, timeout_s: float) -> None:
        """Send what is queued, within about `timeout_s`, and end the thread."""
        self.stopping = True
        self.wake.set()
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            return  # an export still waits on the collector: the daemon thread ends with us
        self._drain()
