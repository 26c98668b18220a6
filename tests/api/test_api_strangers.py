"""The `[api] port` keeps room for those who prove themselves (issue 28, item 5): connections
that announce a body and never send it, with no token, no session key and no signature, give way
to a token holder's requests instead of holding every slot until their deadline; strangers owing
a request are held to a quarter of `max_connections`. A token holder's own busy connections are
still never closed for a newcomer (it is answered 503)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx

from agentd.api.connections import STRANGER_GRACE_S
from tests.api.test_api_connections import (
    OWED_BODY,
    Stream,
    closed_within,
    daemon,
    opened,
    still_open,
)
from tests.api.test_api_connections import token_of as token
from tests.conftest import Home


def owed_with_token(secret: str) -> bytes:
    """A token holder's decision whose body is announced and not (yet) sent."""
    return (
        b"POST /api/inbox/1/approve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
        b"Authorization: Bearer " + secret.encode() + b"\r\nContent-Type: application/json\r\n\r\n"
    )


async def closed(streams: list[Stream]) -> None:
    for _, writer in streams:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_api_strangers_owing_a_body_give_way_to_token_holders(home: Home, serve: Any) -> None:
    # Deadlines long enough that only eviction can free a slot within the test.
    port = await daemon(home, serve, "max_connections = 8\nrequest_timeout_s = 60", web=True)
    strangers = [await opened(port, OWED_BODY) for _ in range(8)]
    # They have had their moment to send (a fresh stranger is not yet counted against the
    # quarter): without it, the outcome hung on whether the 8 answers below took longer than
    # STRANGER_GRACE_S — true only while each stalled ~40 ms on Nagle's delay.
    await asyncio.sleep(STRANGER_GRACE_S + 0.3)
    headers = {"Authorization": f"Bearer {token(home)}"}
    answered = []
    for _ in range(8):  # each on a new connection
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as c:
            answered.append((await c.get("/api/daemon")).status_code)
    assert answered == [200] * 8
    left = [s for s in strangers if await still_open(s)]
    assert len(left) <= 2  # a quarter of max_connections
    await closed(strangers)


async def test_api_strangers_are_capped_below_max_connections(home: Home, serve: Any) -> None:
    port = await daemon(home, serve, "max_connections = 16\nrequest_timeout_s = 60", web=True)
    strangers = [await opened(port, OWED_BODY) for _ in range(12)]
    await asyncio.sleep(STRANGER_GRACE_S + 0.3)  # they have had their moment to send
    newer = []
    for _ in range(12):  # each newcomer sends the oldest sitting stranger away
        newer.append(await opened(port, OWED_BODY))
        await asyncio.sleep(0.05)
    assert sum([await still_open(s) for s in strangers]) <= 4
    await closed(strangers + newer)


async def test_api_token_holders_busy_connections_are_not_closed_for_a_newcomer(
    home: Home, serve: Any
) -> None:
    port = await daemon(home, serve, "max_connections = 2\nrequest_timeout_s = 1")
    busy = []
    for _ in range(2):  # one at a time: each has proven itself before the next comes
        busy.append(await opened(port, owed_with_token(token(home))))
        await asyncio.sleep(0.2)
    refused = await closed_within(await opened(port), 2)
    assert refused.startswith(b"HTTP/1.1 503") and b"too many connections" in refused
    for stream in busy:  # until their deadline
        assert await closed_within(stream, 3) == b""
