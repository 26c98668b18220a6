"""`GET /metrics` (Prometheus text) on the API's port, answered before the web guard: a scrape
carries no session key and, with a token, comes from anywhere (docs/observability.md).

Who may scrape: nobody while `[metrics] enabled` is false (404). With `token_env`, only a client
sending that token as `Authorization: Bearer …` — the web inbox's session key and the API's own
token open nothing here. Without it, a loopback client naming a loopback Host (a page elsewhere
cannot reach it through DNS rebinding). The render runs on a thread: a step never waits for it.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agentd import config as config_pkg
from agentd.db import metrics as qm
from agentd.runs.deps import Deps
from agentd.telemetry import home
from agentd.telemetry.meter import Names
from agentd.web import auth

PATH = "/metrics"
log = structlog.get_logger("agentd.api")


def names_of(cfg: Any) -> Names:
    """The label values the config names (agents, models, channels, actions)."""
    return Names(cfg.agents, cfg.models, cfg.notify, cfg.actions)


def before(app: ASGIApp, deps: Deps) -> ASGIApp:
    """`app`, with `GET /metrics` answered first (only that path: the rest goes on unchanged)."""

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await app(scope, receive, send)
            return
        response = await answer(Request(scope, receive), deps)
        response.headers.setdefault("Cache-Control", "no-store")
        await response(scope, receive, send)

    return routed


def refusal(request: Request, cfg: Any) -> Response | None:
    """Why this request may not scrape, as the response; None when it may."""
    metrics = cfg.metrics
    if not metrics.enabled:
        return PlainTextResponse("not found: metrics are off ([metrics] enabled = false)", 404)
    if request.method not in ("GET", "HEAD"):
        return PlainTextResponse("GET /metrics only", 405, {"Allow": "GET, HEAD"})
    if metrics.token_env is not None:
        token = config_pkg.secret(metrics.token_env)
        if token is None:
            return PlainTextResponse(f"[metrics] token_env names {metrics.token_env}, which is not "
                                     "set in the daemon's environment: set it and restart", 503)  # fmt: skip
        if auth.bearer_ok(request.headers, token):
            return None
        return PlainTextResponse(f"a Bearer token is required: the one in {metrics.token_env}",
                                 401, {"WWW-Authenticate": "Bearer"})  # fmt: skip
    if not _loopback(request) or not auth.host_trusted(request.headers.get("host", "")):
        return PlainTextResponse("metrics are open to loopback clients only; set [metrics] "
                                 "token_env to let a remote Prometheus scrape with a token", 403)  # fmt: skip
    return None


def _loopback(request: Request) -> bool:
    client = request.client
    if client is None:  # the unix socket: the home's owner
        return True
    try:
        return ipaddress.ip_address(client.host).is_loopback
    except ValueError:
        return False


async def answer(request: Request, deps: Deps) -> Response:
    cfg = deps.config
    if (refused := refusal(request, cfg)) is not None:
        return refused
    deps.meter.names = names_of(cfg)

    def read(c: Any) -> dict[str, Any] | None:
        return qm.home(c) if qm.exporter(c, deps.owner) else None

    figures = await deps.store.read(read)
    body = await asyncio.to_thread(home.render, deps.meter, figures)
    return Response(body, 200, media_type=home.CONTENT_TYPE)
