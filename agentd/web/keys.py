"""The signed session a request carries. A page's script signs each request with its session's
key (web/proof.py) and sends the signature only to agentd, after agentd proved itself: as the
`X-Agentd-Auth` header of what it fetches, or as the first field (`_auth`) of a form it submits.
Nothing a browser sends by itself carries it, and the key itself never travels."""

from __future__ import annotations

from urllib.parse import unquote_plus

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope

HEADER = "x-agentd-auth"
FIELD = b"_auth="
MAX_AUTH_CHARS = 160  # ID.CHALLENGE.MAC is at most 18 + 64 + 64 characters and two dots
FORM = "application/x-www-form-urlencoded"


async def key_of(scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
    """The signature `scope`'s request carries (None: none), and the `receive` the app must read
    the request from. A form's signature is its first field: only that much of the body is read
    before the session is known (never a whole body from someone without one), then handed on."""
    headers = Headers(scope=scope)
    given = headers.get(HEADER)
    if given is not None or scope["method"] != "POST":
        return given, receive
    if headers.get("content-type", "").split(";")[0].strip().lower() != FORM:
        return None, receive
    head, more = b"", True
    while more and len(head) <= len(FIELD) + MAX_AUTH_CHARS:
        message = await receive()
        if message["type"] != "http.request":
            return None, _first(message, receive)  # the client went away
        head += message.get("body", b"")
        more = message.get("more_body", False)
    replay = _first({"type": "http.request", "body": head, "more_body": more}, receive)
    value, sep, _ = head.removeprefix(FIELD).partition(b"&")
    if not head.startswith(FIELD) or not (sep or not more) or len(value) > MAX_AUTH_CHARS:
        return None, replay
    return unquote_plus(value.decode("latin-1")), replay


def _first(message: Message, receive: Receive) -> Receive:
    """`receive`, after giving `message` (what was read already) once."""
    pending = [message]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
