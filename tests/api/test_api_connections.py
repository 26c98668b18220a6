"""The API's connections within bounds (issue 18, item 2), on an in-process daemon's real
listeners: a request must arrive within `request_timeout_s` (silent, half-sent, trickled, or a
body owed), a refusal closes its connection, each listener holds its own `max_connections` (the
oldest idle one makes room; all busy: 503, in test_api_strangers.py), and a failed accept is
one log line a minute."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import textwrap
from typing import Any

import httpx

from tests.api.test_api import FINISH, client
from tests.conftest import Home, closed_port

CONFIG = """
[daemon]
poll_interval_s = 0.02

[api]
port = {port}
{api}

[web]
enabled = {web}

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish", "ask"]
"""
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]
OWED_BODY = (
    b"POST /logout HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\n\r\n_key="
)


async def daemon(home: Home, serve: Any, api: str, web: bool = False) -> int:
    port = closed_port()
    home.write_config(CONFIG.format(port=port, api=api, web=str(web).lower()), [FINISH])
    await serve()
    return port


async def opened(port: int, send: bytes = b"") -> Stream:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(send)
    await writer.drain()
    return reader, writer


async def closed_within(stream: Stream, timeout_s: float) -> bytes:
    """What the server sent before it closed the connection (fails if it does not in time)."""
    reader, writer = stream
    try:
        return await asyncio.wait_for(reader.read(), timeout_s)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def still_open(stream: Stream) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stream[0].read(1), 0.2)
        return False
    return True


async def asked_once(port: int, token: str) -> Stream:
    """A connection that made one request with the token, answered, now idle (kept alive)."""
    auth = f"Authorization: Bearer {token}\r\n"
    reader, writer = await opened(
        port, f"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    await reader.readexactly(length)
    return reader, writer


def token_of(home: Home) -> str:
    return home.paths.api_token.read_text().strip()


async def test_api_a_request_that_does_not_arrive_in_time_is_closed(home: Home, serve: Any) -> None:
    port = await daemon(home, serve, "request_timeout_s = 0.5", web=True)
    silent = await opened(port)
    half = await opened(port, b"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc")
    owed = await opened(port, OWED_BODY)
    trickled = await opened(port)

    async def trickle() -> None:  # one byte each 50 ms: the deadline is not moved by bytes
        with contextlib.suppress(OSError):
            for byte in b"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n":
                trickled[1].write(bytes([byte]))
                await asyncio.sleep(0.05)

    dripping = asyncio.create_task(trickle())
    for stream in (silent, half, owed, trickled):
        assert await closed_within(stream, 3) == b""
    dripping.cancel()


async def test_api_a_kept_alive_connection_is_answered_then_closed_when_idle(
    home: Home, serve: Any
) -> None:
    port = await daemon(home, serve, "request_timeout_s = 0.5")
    auth = f"Authorization: Bearer {token_of(home)}\r\n"
    reader, writer = await opened(port)
    for _ in range(2):  # in time, twice on one connection
        writer.write(f"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 3)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        await asyncio.sleep(0.2)
    assert await closed_within((reader, writer), 3) == b""  # then idle: closed


async def test_api_a_refused_request_closes_its_connection(home: Home, serve: Any) -> None:
    port = await daemon(home, serve, "")
    anonymous = await opened(port, b"GET /api/inbox HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    reply = await closed_within(anonymous, 2)  # not held for the keep-alive timeout (5 s)
    assert reply.startswith(b"HTTP/1.1 401") and b"connection: close" in reply.lower()


async def test_api_listeners_hold_their_own_connections_and_the_oldest_idle_makes_room(
    home: Home, serve: Any
) -> None:
    port = await daemon(home, serve, "max_connections = 4\nrequest_timeout_s = 60")
    first = [await asked_once(port, token_of(home)) for _ in range(4)]  # idle, not strangers
    second = [await asked_once(port, token_of(home)) for _ in range(2)]
    for stream in first[:2]:
        assert await closed_within(stream, 2) == b""
    assert all([await still_open(s) for s in first[2:] + second])
    # The unix socket is counted apart: the CLI's way in stays open.
    async with client(home, token_of(home)) as unix:
        assert (await unix.get("/api/daemon")).status_code == 200
    # And a new client of the port is answered: another idle connection makes room.
    headers = {"Authorization": f"Bearer {token_of(home)}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers) as tcp:
        assert (await tcp.get("/api/daemon")).status_code == 200
    for _, writer in first[2:] + second:
        writer.close()


# A loop whose descriptors are all taken, accepting: asyncio's accept loop reports each failure
# to the loop's exception handler (a traceback each, thousands a second by default).
OUT_OF_FILES = textwrap.dedent("""
    import asyncio, resource, socket, sys
    from agentd import log
    from agentd.api import openfiles

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with openfiles.accept_failures_logged(loop):
            server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, backlog=128)
            hog = []
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
            try:
                while True:
                    hog.append(socket.socket())
            except OSError:
                pass
            print(server.sockets[0].getsockname()[1], flush=True)
            await asyncio.sleep(float(sys.argv[1]))

    log.configure(fmt="json")
    asyncio.run(main())
""")


def test_api_an_accept_out_of_files_is_one_line_a_minute() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", OUT_OF_FILES, "2.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        _, stderr = child.communicate(timeout=30)
        for c in clients:
            c.close()
    lines = stderr.splitlines()
    assert "Traceback" not in stderr
    assert len(lines) == 1 and '"api.accept_failed"' in lines[0], stderr[:3000]
    assert "Too many open files" in lines[0]
