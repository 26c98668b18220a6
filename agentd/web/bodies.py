"""Request bodies read within a limit, for every endpoint of the daemon's HTTP listeners that
reads one (the JSON API's decisions, the pages' forms, the inbound hooks): a declared
`Content-Length` over the limit is refused before a byte of the body is read, and a body sent
without one (chunked) or longer than declared is read with a running count, refused as soon as
it passes the limit. Nothing ever holds more than the limit in memory.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentd.errors import UsageError

FORM_MAX_BYTES = 64 * 1024  # a login, a decision with its note and edit: far less than this


class BodyRefused(UsageError):
    """The body cannot be read as sent: answered `status` (agentd/api/server.py), then closed."""

    status = 400


class TooLarge(BodyRefused):
    """The body is over the endpoint's limit."""

    status = 413


class Gone(BodyRefused):
    """The client went away before its body had all come."""


def declared_length(request: Request) -> int | None:
    """The `Content-Length` the request declares, or None (chunked); a malformed one is refused."""
    given = request.headers.get("content-length")
    if given is None:
        return None
    if not (given.strip().isascii() and given.strip().isdigit()) or len(given) > 20:
        raise BodyRefused(f"Content-Length {given[:40]!r} is not a number of bytes")
    return int(given)


def refuse_declared(request: Request, limit: int) -> None:
    """TooLarge when the declared length is over `limit` (nothing of the body read)."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise TooLarge(f"the body is {declared:,} bytes; at most {limit:,} fit")


async def read(request: Request, limit: int) -> bytes:
    """The whole body, at most `limit` bytes: TooLarge before reading when its declared length
    is over, or as soon as what has come passes the limit (the rest is never read)."""
    refuse_declared(request, limit)
    chunks: list[bytes] = []
    seen = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise TooLarge(f"the body passed {limit:,} bytes, the most that fit; not read on")
            chunks.append(chunk)
    except ClientDisconnect:
        raise Gone("the client closed the connection before its body had all come") from None
    return b"".join(chunks)


async def form(request: Request, limit: int = FORM_MAX_BYTES) -> FormData:
    """A urlencoded form read within `limit` (Starlette's own parser reads any length)."""
    raw = await read(request, limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused("the form is not UTF-8") from None
    fields: list[tuple[str, str | UploadFile]] = [*parse_qsl(text, keep_blank_values=True)]
    return FormData(fields)


class Limited:
    """An ASGI app (one that reads its body itself, e.g. the MCP SDK's endpoint) refused a body
    over `limit`: 413 before reading when declared, else its reads stop at the limit (413 if it
    has not answered yet). A class, not a closure: Starlette's Route calls a function with a
    Request."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            refuse_declared(Request(scope), self.limit)
        except BodyRefused as e:
            await PlainTextResponse(str(e), e.status)(scope, receive, send)
            return
        seen, started = 0, False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise TooLarge(f"the body passed {self.limit:,} bytes, the most that fit")
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except TooLarge as e:
            if started:
                raise
            await PlainTextResponse(str(e), e.status)(scope, receive, send)
