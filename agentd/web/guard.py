"""Who may ask what, before any route of the control API runs, and the headers on every answer.

In order: a trusted Host (DNS rebinding), `POST /poke` only over the unix socket, no cross-site
state change (403), a Bearer token for `/api/` and `/mcp`, the pages only when `[web] enabled`,
then a session cookie (else the login, which comes back to the page asked for). Every response,
refusals included, says it may not be framed, sniffed, cached or followed by a referrer.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentd.text import to_json
from agentd.web import auth, html, routes

MCP_PATH = "/mcp"  # agentd's MCP server over streamable HTTP, as `agentd mcp` over stdio
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HEADERS = {
    # Clickjacking: a page on another 127.0.0.1 port is same-site, so the SameSite=Strict cookie
    # goes into its frame; no page of ours may be framed at all (the header and the CSP).
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": html.CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",  # inbox pages and API answers are never served stale
}


def guard(app: ASGIApp, token: auth.Token, pages_on: Callable[[], bool]) -> ASGIApp:
    """`app` behind the checks of the module docstring; `pages_on` is asked at each request, so
    a reload that turns `[web] enabled` off closes the pages at once."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        refusal = _refusal(Request(scope), token.current(), pages_on())
        await (refusal or app)(scope, receive, send_with_headers)

    return guarded


def _refusal(request: Request, secret: str, pages_on: bool) -> Response | None:
    headers = request.headers
    path = request.url.path
    if not auth.host_trusted(headers.get("host", "")):
        return PlainTextResponse("untrusted Host header: use localhost or 127.0.0.1", 400)
    via_unix = (request.scope.get("server") or ("", None))[1] is None
    if path == "/poke":
        return None if via_unix else PlainTextResponse("not found", 404)
    if request.method not in SAFE_METHODS and (why := auth.cross_site(headers)) is not None:
        return PlainTextResponse(f"cross-site request refused ({why})", 403)
    if path.startswith("/api/") or path == MCP_PATH:
        if auth.bearer_ok(headers, secret):
            return None
        return Response(to_json({"error": "a Bearer token is required (agentd web "
                        "--token prints it)"}), 401, {"WWW-Authenticate": "Bearer"},
                        media_type="application/json")  # fmt: skip
    if not pages_on:
        return PlainTextResponse("not found: the web inbox is off ([web] enabled = false)", 404)
    if path in routes.PUBLIC:
        return None
    if auth.same(request.cookies.get(auth.COOKIE), auth.session_value(secret)):
        return None
    if path == "/events":
        return PlainTextResponse("log in first", 401)
    if request.method != "GET":
        return RedirectResponse("/login", status_code=303)
    # The page asked for (a notification's /items/5) is where the login comes back to.
    wanted = path + (f"?{request.url.query}" if request.url.query else "")
    if headers.get("sec-fetch-site") == "cross-site":
        # A link followed from another site (a mail, the ntfy app) never carries the Strict
        # cookie, logged in or not: ask again from our own page, whose request does.
        return _reopen(auth.local_path(wanted))
    login = "/login" if wanted == "/" else f"/login?{urlencode({'next': wanted})}"
    return RedirectResponse(login, status_code=303)


def _reopen(wanted: str) -> Response:
    """A page that opens `wanted` (a local path) again, as a navigation of our own origin."""
    target = html.h(wanted)
    body = (f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={target}">'
            f'<title>agentd</title><p><a href="{target}">Open the agentd inbox</a></p>')  # fmt: skip
    return Response(body, 200, media_type="text/html")
