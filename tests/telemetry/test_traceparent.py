"""With tracing on, what leaves carries the span's trace context: an HTTP action's request and a
webhook notification's POST send `traceparent` naming the current trace; with tracing off, none."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from agentd.actions import ActionContext
from agentd.actions.http import HttpExecutor
from agentd.config import HttpAction, TracingConfig
from agentd.config.notify import WebhookNotify
from agentd.notify.webhook import Webhook
from agentd.telemetry.meter import Meter
from agentd.telemetry.tracing import Tracing
from tests.telemetry.otlp_receiver import Receiver

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@pytest.fixture
def tracing() -> Iterator[Tracing]:
    receiver = Receiver()
    t = Tracing.start(TracingConfig(enabled=True, endpoint=receiver.url), Meter())
    try:
        yield t
    finally:
        t.stop()
        receiver.stop()


def _recording() -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    return seen, httpx.MockTransport(handle)


async def test_an_http_action_sends_the_action_span_traceparent(tracing: Tracing) -> None:
    seen, transport = _recording()
    cfg = HttpAction(type="http", urls=["https://api.example/hook"])
    executor = HttpExecutor("hook", cfg, transport=transport)
    with tracing.step(7, 3, 5), tracing.child("action hook") as span:
        ctx = ActionContext(run_id=7, goal_id=3, seq=5, action="hook",
                            traceparent=tracing.traceparent())  # fmt: skip
        await executor.execute({"url": "api.example"}, ctx)
    sent = TRACEPARENT.match(seen[0].headers["traceparent"])
    assert sent is not None
    assert sent[1] == f"{span.get_span_context().trace_id:032x}"
    assert sent[2] == f"{span.get_span_context().span_id:016x}"


async def test_without_tracing_no_traceparent_is_sent() -> None:
    seen, transport = _recording()
    executor = HttpExecutor("hook", HttpAction(type="http", urls=["https://api.example/hook"]),
                            transport=transport)  # fmt: skip
    off = Tracing.off()
    ctx = ActionContext(run_id=7, goal_id=3, seq=5, action="hook", traceparent=off.traceparent())
    await executor.execute({"url": "api.example"}, ctx)
    assert "traceparent" not in seen[0].headers


async def test_a_webhook_notification_sends_the_notify_span_traceparent(tracing: Tracing) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from typing import Any

    headers: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers.append(dict(self.headers))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        hook = Webhook("ops", WebhookNotify(type="webhook", url=url))
        with tracing.child("notify ops") as span:
            await hook.send(
                {"title": "approve?", "category": "inbox"}, message_id="m1", timestamp=1
            )
    finally:
        server.shutdown()
        server.server_close()
    sent = TRACEPARENT.match(headers[0]["traceparent"])
    assert sent is not None, headers[0]["traceparent"]
    assert sent[2] == f"{span.get_span_context().span_id:016x}"
