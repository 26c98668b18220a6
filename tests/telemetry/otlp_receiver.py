"""An OTLP/HTTP trace receiver for the tracing tests: `POST /v1/traces` bodies decoded with
opentelemetry-proto into plain span records (trace id, span id, parent, name, attributes, links)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for rs in request.resource_spans:
                    service = {a.key: _value(a.value) for a in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            receiver.spans.append({
                                "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                                "parent": s.parent_span_id.hex(), "name": s.name,
                                "attributes": {a.key: _value(a.value) for a in s.attributes},
                                "links": [(ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links],
                                "service": service.get("service.name"),
                            })  # fmt: skip
                receiver.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _sink() -> None:
    """bench/telemetry.py's collector, in a process apart: it reads each body and answers 200
    without decoding it (on a 2-core machine a decoding receiver took the cores the bench times;
    a real collector runs elsewhere). The tests decode with `Receiver`."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1/traces", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    _sink()
