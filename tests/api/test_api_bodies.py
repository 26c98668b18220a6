"""Every endpoint of the API's listeners that reads a body bounds it (issue 28, item 6): a
declared `Content-Length` over the limit is answered 413 before a byte of the body is read (the
old code read it all, or waited for it, first), and a chunked body that passes the limit is
answered 413 without being read on: the JSON API's decisions, the pages' forms, /mcp."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.test_api_connections import closed_within, daemon, opened
from tests.api.test_api_connections import token_of as token
from tests.conftest import Home

HUGE = 300 * 1024 * 1024


def head(path: str, extra: str) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


async def test_api_a_declared_body_over_the_limit_is_refused_before_it_is_read(
    home: Home, serve: Any
) -> None:
    # A long deadline: only a refusal can answer within the test (none of the body is sent).
    port = await daemon(home, serve, "request_timeout_s = 60", web=True)
    bearer = f"Authorization: Bearer {token(home)}\r\n"
    asks = {
        "/api/inbox/1/approve": f"{bearer}Content-Type: application/json\r\n",
        "/mcp": f"{bearer}Content-Type: application/json\r\nAccept: application/json\r\n",
        "/login": "Content-Type: application/x-www-form-urlencoded\r\n",
    }
    for path, extra in asks.items():
        stream = await opened(port, head(path, f"{extra}Content-Length: {HUGE}\r\n"))
        reply = await closed_within(stream, 5)
        assert reply.startswith(b"HTTP/1.1 413"), (path, reply[:200])


async def test_api_a_chunked_body_passing_the_limit_is_refused_unread(
    home: Home, serve: Any
) -> None:
    port = await daemon(home, serve, "request_timeout_s = 60")
    extra = f"Authorization: Bearer {token(home)}\r\nTransfer-Encoding: chunked\r\n"
    reader, writer = await opened(port, head("/api/inbox/1/approve", extra))
    chunk = b"x" * 16384
    sent = 0

    async def send() -> None:
        nonlocal sent
        try:
            for _ in range(4096):  # 64 MiB offered; the daemon stops reading at 64 KiB
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                sent += len(chunk)
        except OSError:
            pass  # the daemon closed the connection: it read no more

    answer = asyncio.create_task(reader.readuntil(b"\r\n"))  # read as it comes, before the reset
    sending = asyncio.create_task(send())
    status = await asyncio.wait_for(answer, 10)
    await sending
    writer.close()
    assert status.startswith(b"HTTP/1.1 413"), status
    assert sent < 64 * 1024 * 1024
