"""The api port answers without Nagle's delay: its accepted TCP connections have TCP_NODELAY (an
answer written as headers then body otherwise waits ~40 ms for the client's delayed ACK)."""

from __future__ import annotations

import asyncio
import socket

from agentd.api import connections


async def test_api_port_connections_have_tcp_nodelay() -> None:
    listening = connections.gate(connections.Listener("port", 10), socket.AF_INET)
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listening)
    try:
        _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        assert await asyncio.wait_for(seen, 30) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
