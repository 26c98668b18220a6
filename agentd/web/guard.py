"""Who may ask what, before any route of the control API runs, and the headers on every answer.

In order: a trusted Host (DNS rebinding), `POST /poke` only over the unix socket, no cross-site
state change (403), a Bearer token for `/api/` and `/mcp`, the pages only when `[web] enabled`,
then a live session's signature of this request (web/proof.py): a navigation, which carries
none, gets the shell whose script fetches the page signed (or goes to the login, which comes
back to the page asked for). Every response, refusals included, says it may not be framed,
sniffed, cached or followed by a referrer.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentd.text import to_json
from agentd.web import auth, html, keys, proof, routes, trust

MCP_PATH = "/mcp"  # agentd's MCP server over streamable HTTP, as `agentd mcp` over stdio
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HEADERS = {
    # Clickjacking: a page on another 127.0.0.1 port is the same site; no page of ours may be
    # framed at all (the header and the CSP).
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

        request = Request(scope)
        refusal = _refusal(request, token.current(), pages_on())
        if refusal is None and _needs_session(request.url.path):
            key, receive = await keys.key_of(scope, receive)
            refusal = await _session_refusal(request, proof.Signed.parse(key), _site(app))
            if refusal is None:
                trust.vouch(scope)  # a live session's signed request
        elif refusal is None and _bearer_path(request.url.path):
            trust.vouch(scope)  # the Bearer token
        await (refusal or app)(scope, receive, send_with_headers)

    return guarded


def _site(app: ASGIApp) -> routes.Site:
    """The pages' Site, which the API's Starlette app carries (agentd/api/server.py)."""
    site = getattr(getattr(app, "state", None), "site", None)
    assert isinstance(site, routes.Site), "the guarded app carries the pages' Site"
    return site


def _needs_session(path: str) -> bool:
    """Past `_refusal`, everything but the login, the proof, the poke, the JSON API, /mcp and
    the old item links (a redirect that shows nothing: a signed fetch must not follow one)."""
    if path.startswith("/inbox/") and path.removeprefix("/inbox/").isdigit():
        return False
    return path not in routes.PUBLIC and path != "/poke" and not _bearer_path(path)


def _bearer_path(path: str) -> bool:
    return path.startswith("/api/") or path == MCP_PATH


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
    if _bearer_path(path):
        if auth.bearer_ok(headers, secret):
            return None
        sent = headers.get("authorization", "").lower().startswith("bearer ")
        why = ("this Bearer token is not the daemon's (rotated, or another home's)" if sent
               else "a Bearer token is required")  # fmt: skip
        return Response(to_json({"error": f"{why}; `agentd web --token` prints the current one"}),
                        401, {"WWW-Authenticate": "Bearer"},
                        media_type="application/json")  # fmt: skip
    if not pages_on:
        return PlainTextResponse("not found: the web inbox is off ([web] enabled = false)", 404)
    return None


async def _session_refusal(
    request: Request, signed: proof.Signed | None, site: routes.Site
) -> Response | None:
    """None when `signed` is a live session's signature of this very request (the session's id
    goes to the route: logout ends it)."""
    scope = request.scope
    target = proof.target(scope.get("raw_path") or scope["path"].encode(), scope["query_string"])
    session_id = None if signed is None else await site.session(signed, request.method, target)
    if session_id is not None:
        request.scope.setdefault("state", {})[routes.SESSION] = session_id
        return None
    if request.url.path == "/events":
        return PlainTextResponse("log in first", 401)
    if request.method not in SAFE_METHODS:
        return RedirectResponse("/login", status_code=303)  # a form sent without a live key
    # A navigation (a notification's /items/5, a link from a mail) carries no key: the shell
    # fetches the page with the key this origin's storage holds, or opens the login.
    return HTMLResponse(html.shell(), 401)
