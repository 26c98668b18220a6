"""A little service Prometheus scrapes: `svc_requests_total{code}` counters that grow by 100
requests per scrape, `error_share` of them 500s — the test changes the share."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Service:
    def __init__(self) -> None:
        self.error_share = 0.0
        self.ok = 0.0
        self.errors = 0.0
        self.scrapes = 0
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                service.scrapes += 1
                service.errors += 100 * service.error_share
                service.ok += 100 * (1 - service.error_share)
                body = (
                    "# TYPE svc_requests_total counter\n"
                    f'svc_requests_total{{code="200"}} {service.ok}\n'
                    f'svc_requests_total{{code="500"}} {service.errors}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
