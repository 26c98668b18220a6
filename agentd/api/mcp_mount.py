"""The daemon's /mcp, built at its first request: the MCP SDK is most of what a daemon would
import to start (~0.9 s of CPU), and most daemons never serve an MCP client.

The first request builds the server (agentd/mcp/server.py) and starts its session manager in a
task of `serving()`, which `ApiServer.run` holds around the HTTP server: the sessions live until
the server stops, as they did when the manager started with the daemon. Requests that arrive
meanwhile wait for the same start. A start that fails answers 503 and is logged; the next
request tries again. The Bearer token, the Host and the body bound are checked in front of this
app (agentd/web/guard.py, agentd/web/bodies.py), before anything is built.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

import structlog
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agentd.config import Config, Paths
from agentd.web.guard import MCP_PATH

log = structlog.get_logger("agentd.api")


class LazyMcp:
    """An ASGI app for MCP_PATH that builds the MCP server at its first request."""

    def __init__(self, paths: Paths, config: Callable[[], Config]) -> None:
        self.paths = paths
        self.config = config  # the config in force at each request (a reload swaps it)
        self.mcp: Any = None  # the SDK's server, once built
        self._ready: asyncio.Future[ASGIApp] | None = None  # the SDK's endpoint, once started
        self._host: asyncio.TaskGroup | None = None  # while `serving()`
        self._closing = asyncio.Event()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """While the HTTP server serves: a started MCP server runs its sessions in here, and
        they end (the manager's task group cancelled, the store closed) when this exits."""
        async with asyncio.TaskGroup() as tg:
            self._host = tg
            try:
                yield
            finally:
                self._host = None
                self._closing.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            endpoint = await self._started()
        except Exception as e:  # said to the client and logged; tried again
            text = f"The MCP endpoint could not start ({e}); the daemon's log says more."
            await PlainTextResponse(text, 503)(scope, receive, send)
            return
        await endpoint(scope, receive, send)

    async def _started(self) -> ASGIApp:
        if self._ready is None:
            if self._host is None:
                raise RuntimeError("the daemon's API is stopping")
            self._ready = asyncio.get_running_loop().create_future()
            self._host.create_task(self._run(self._ready))
        ready = self._ready
        return await asyncio.shield(ready)  # a request cancelled while waiting leaves the start

    async def _run(self, ready: asyncio.Future[ASGIApp]) -> None:
        try:
            # Imported on a thread: the loop goes on serving while the SDK loads.
            mcp = (await asyncio.to_thread(_sdk)).build(self.paths, self.config, watch=False)
            app = mcp.streamable_http_app(streamable_http_path=MCP_PATH)
            endpoint = next(r.endpoint for r in app.routes
                            if isinstance(r, Route) and r.path == MCP_PATH)  # fmt: skip
            async with mcp.session_manager.run():
                self.mcp = mcp
                ready.set_result(endpoint)
                await self._closing.wait()
        except Exception as e:
            if not ready.done():  # a start that failed: the next request tries again
                log.error("mcp.start_failed", error=str(e), exc_info=True)
                self._ready = None
                ready.set_exception(e)
                ready.exception()  # retrieved: asyncio does not warn when no request waits
                return
            raise
        finally:
            if not ready.done():  # cancelled before it started: the waiting requests end too
                self._ready = None
                ready.cancel()


def _sdk() -> ModuleType:
    from agentd.mcp import server  # the MCP SDK: loaded here, at the first request to /mcp

    return server
