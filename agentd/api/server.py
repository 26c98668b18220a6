"""The control API's server: one Starlette app on an embedded uvicorn server in the daemon's loop.

uvicorn's signal handling is off (`capture_signals`: the daemon owns TERM, INT and HUP) and so is
its 0.1 s housekeeping tick (`main_loop` waits for the stop instead: an idle daemon sleeps). The
unix socket is bound under a temporary name, set to 0600, then renamed into place, so `api.sock`
never exists with wider rights. Every request passes agentd/web/guard.py: a trusted Host (DNS
rebinding), no cross-site state change (403), a Bearer token for `/api/`, a session key for
pages (served only with `[web] enabled`), and anti-framing headers on every response. Each
listener holds a bounded number of connections, each request has a deadline to arrive, and a
refusal closes its connection (agentd/api/connections.py): a flood of the port is not our stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agentd.api import connections, control, decide, metrics, openfiles, params
from agentd.api.mcp_mount import LazyMcp
from agentd.config import Paths
from agentd.errors import NotFound
from agentd.hooks import receiver as hooks_receiver
from agentd.hooks.receiver import Receiver
from agentd.operator import home, sessions
from agentd.runs.deps import Deps
from agentd.text import to_json
from agentd.web import auth, bodies, data, html, routes
from agentd.web.guard import MCP_PATH, guard
from agentd.web.routes import Site

log = structlog.get_logger("agentd.api")
KEEPALIVE_S = 15.0  # an SSE comment this often keeps proxies and tunnels from closing the stream
WATCH_S = 1.0  # while pages listen, how often the database's data_version is compared
BACKLOG = 128
MCP_MAX_BODY_BYTES = 1024 * 1024  # one JSON-RPC message: a tool call's arguments


class Changes:
    """A change counter pages follow over SSE: bumped on the daemon's own news (a run waits, a
    poke, a web write) and when the database's data_version moves (anyone's commit)."""

    def __init__(self) -> None:
        self.version = 0
        self.listeners = 0
        self.closed = False
        self._event = asyncio.Event()

    def bump(self) -> None:
        self.version += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    def close(self) -> None:
        self.closed = True
        self.bump()

    async def wait(self, seen: int, timeout_s: float) -> int:
        if self.version == seen and not self.closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout_s)
        return self.version


class _Embedded(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, stop: asyncio.Event) -> None:
        super().__init__(config)
        self._stop = stop

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon's handlers stay: TERM drains runs, HUP reloads

    async def main_loop(self) -> None:
        await self.on_tick(0)  # sets the default headers once
        await self._stop.wait()


def _json(value: Any, status: int = 200) -> Response:
    return Response(to_json(value), status_code=status, media_type="application/json")


class ApiServer:
    """The daemon's API: `bind()` before the root tasks start, then `run(stop)` among them."""

    def __init__(self, paths: Paths, deps: Deps, nudge: Callable[[], None]) -> None:
        self.paths = paths
        self.deps = deps
        self.nudge = nudge
        self.changes = Changes()
        self.sockets: list[socket.socket] = []
        self.unix = False  # the socket is up: the CLI's pokes arrive
        self.port: int | None = None
        self.port_failed: str | None = None  # "PORT: error" when the TCP listener could not open
        self.token: auth.Token | None = None  # read in `bind`
        self.limits: connections.Limits | None = None  # set in `bind`, from the config
        self.pokes = 0
        self.on_poke: Callable[[], None] = lambda: None  # the check-in service looks too
        self.control = control.Control(paths, lambda: self.deps.config)  # sees, reload
        # MCP over streamable HTTP at /mcp, behind the Bearer token: the SDK's server is built
        # at the first request (agentd/api/mcp_mount.py); `mcp.mcp` is it, once built.
        self.mcp = LazyMcp(paths, lambda: self.deps.config)
        self._server: _Embedded | None = None  # uvicorn's, while `run` serves
        self.hooks: Receiver | None = None  # POST /hooks/NAME (built in `app()`)

    def on_change(self) -> None:
        """`deps.on_change`: the scheduler looks now, and pages hear of it."""
        self.nudge()
        self.changes.bump()

    def bind(self) -> bool:
        """Open the listeners; True when the unix socket is up. A listener that cannot open is
        logged and left out: the daemon runs on, the scheduler keeps its fast scan."""
        self.token = auth.Token(self.paths.api_token)
        api = self.deps.config.api  # the listeners' bounds hold from the start to the stop
        limit = openfiles.share(api.max_connections)
        self.limits = connections.Limits(limit, limit, api.request_timeout_s)
        path = self.paths.api_sock
        tmp = path.with_name(f".api.sock.{os.getpid()}")
        sock = connections.gate(self.limits.socket, socket.AF_UNIX)
        try:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            sock.bind(str(tmp))
            tmp.chmod(0o600)
            # Listening from now on: a poke sent before the server task runs (a write right
            # after READY) waits in the backlog instead of being refused and lost.
            sock.listen(BACKLOG)
            tmp.replace(path)  # atomic: never a moment with a wider mode
        except OSError as e:  # e.g. a path over the 107 bytes a unix socket's name may have
            sock.close()
            log.error("api.socket_failed", path=str(path), error=str(e),
                      note="the CLI cannot poke; the daemon scans the database often instead")  # fmt: skip
        else:
            self.sockets.append(sock)
            self.unix = True
        port = self.deps.config.api.listen_port(self.deps.config.web)
        if port is not None:
            tcp = connections.gate(self.limits.port, socket.AF_INET)
            try:
                tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                tcp.bind(("127.0.0.1", port))
                tcp.listen(BACKLOG)
            except OSError as e:
                tcp.close()
                log.error("api.port_failed", port=port, error=str(e))
                self.port_failed = f"{port}: {e.strerror or e}"
                if e.errno == errno.EADDRINUSE:
                    self._end_sessions(port)
            else:
                self.sockets.append(tcp)
                self.port = tcp.getsockname()[1]
        return self.unix

    def _end_sessions(self, port: int) -> None:
        """Another program answers on our port: a page opened there while it did ran its
        script in the sessions' origin, so every session ends (its browsers log in again)."""
        store = home.open_store(self.paths.db, poke=False)
        try:
            ended = sessions.revoke(store, None)
        finally:
            store.close()
        if ended:
            log.warning("web.sessions_ended", port=port, sessions=ended,
                        why="another program holds the port")  # fmt: skip

    def app(self) -> Starlette:
        # The config in force at each request (a reload swaps `deps.config`), never a copy.
        mcp = Route(MCP_PATH, bodies.Limited(self.mcp, MCP_MAX_BODY_BYTES))  # every method, as
        # the SDK's own route: the SDK reads a whole body, bounded here
        app = Starlette(
            routes=[
                mcp,
                Route("/poke", self._poke, methods=["POST"]),
                Route("/events", self._events, methods=["GET"]),
                Route("/api/daemon", self._api_daemon, methods=["GET"]),
                Route("/api/hooks", self._api_hooks, methods=["GET"]),
                *self.control.routes(),
                Route("/api/inbox", self._api_inbox, methods=["GET"]),
                Route("/api/inbox/{item_id:id}", self._api_item, methods=["GET"]),
                Route("/api/inbox/{item_id:id}/{verb}", decide.decide, methods=["POST"]),
                Route("/api/goals", self._api_goals, methods=["GET"]),
                Route("/api/goals/{goal_id:id}", self._api_goal, methods=["GET"]),
                Route("/api/runs/{run_id:id}", self._api_run, methods=["GET"]),
                *routes.ROUTES,
            ],
            exception_handlers={
                NotFound: _not_found,
                404: _not_found,
                bodies.BodyRefused: _body_refused,
            },
        )
        assert self.token is not None, "bind() reads the token"
        app.state.site = Site(self.paths.db, lambda: self.deps.config, self.token, self.on_change)
        store = self.deps.store
        self.hooks = Receiver(lambda: self.deps.config, store.write, self.on_change, store.read)
        return app

    def pages_on(self) -> bool:
        """The pages are served (`[web] enabled`, as the config is now: a reload applies)."""
        return self.deps.config.web.enabled

    async def run(self, stop: asyncio.Event) -> None:
        limits = self.limits
        if not self.sockets or self.token is None or limits is None:
            return  # nothing bound
        guarded = guard(self.app(), self.token, self.pages_on)
        # GET /metrics and /hooks/NAME before the web guard: each authenticates its own callers
        app = connections.closing_refusals(
            _hooks_beside(self.hooks, metrics.before(guarded, self.deps))
        )
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=2,
            date_header=False, server_header=False, http=connections.protocol(limits), ws="none",
            backlog=BACKLOG, timeout_keep_alive=math.ceil(limits.request_timeout_s),
        )  # fmt: skip
        server = self._server = _Embedded(config, stop)
        connections.route_uvicorn_log()
        log.info("api.listening", socket=str(self.paths.api_sock) if self.unix else None,
                 port=self.port, max_connections=limits.port.limit)  # fmt: skip
        try:
            # The MCP endpoint's sessions, once started, live as long as the server.
            with openfiles.accept_failures_logged(asyncio.get_running_loop()):
                async with self.mcp.serving(), asyncio.TaskGroup() as tg:
                    tg.create_task(self._watch(stop))
                    await server.serve(sockets=self.sockets)
                    self.changes.close()  # SSE streams end: the server's shutdown is not held
            if self.hooks is not None:  # refusals not yet written (they are every few seconds)
                await self.hooks.flush()
        finally:
            # Also when cancelled (uvicorn's own shutdown then never ran): nothing it opened
            # outlives this task, not even until the next iteration of the loop.
            await self._closed(server)

    async def _closed(self, server: _Embedded) -> None:
        """Close everything, then wait until the loop has carried the closing out."""
        self.close()
        loop = asyncio.get_running_loop()
        # An aborted transport closes its socket in a callback queued by `abort()`: the loop
        # runs callbacks in the order they were queued, so when the barrier's has run, theirs
        # have. An accept already under way may still hand over a connection: close it too.
        for _ in range(10):
            barrier = loop.create_future()
            loop.call_soon(barrier.set_result, None)
            await barrier
            if not server.server_state.connections:
                break
            self._close_connections(server)
        if server.server_state.tasks:  # request handlers, cancelled: until they have ended
            await asyncio.wait(set(server.server_state.tasks))

    def _close_connections(self, server: _Embedded) -> None:
        for connection in list(server.server_state.connections):
            connection.transport.abort()  # reader removed now, socket closed by the loop next
        for task in server.server_state.tasks:
            task.cancel()

    def close(self) -> None:
        """Close the listeners and remove the socket file (also when `run` never started: a
        daemon stopped between `bind` and its root tasks). Idempotent.

        uvicorn's servers are closed first: that removes the loop's readers of the listeners,
        which closing a bare socket would leave registered under a file descriptor the next
        socket may get (and never be polled for). Then the connections they accepted."""
        server, self._server = self._server, None
        if server is not None:
            for listener in getattr(server, "servers", []):  # set as uvicorn's startup goes
                listener.close()
            self._close_connections(server)
        with contextlib.suppress(RuntimeError):  # no loop runs: nothing can be registered
            loop = asyncio.get_running_loop()
            for sock in self.sockets:  # a startup cancelled mid-way left a server unnamed
                if sock.fileno() != -1:
                    loop.remove_reader(sock)
        for sock in self.sockets:
            sock.close()
        self.sockets = []
        if self.unix:
            self.unix = False
            with contextlib.suppress(FileNotFoundError):
                self.paths.api_sock.unlink()

    async def _watch(self, stop: asyncio.Event) -> None:
        """While pages listen, anyone's commit (the CLI without a poke, our own runs) bumps the
        counter: PRAGMA data_version on the daemon's reader, once per WATCH_S."""
        last = None
        while not stop.is_set():
            if self.changes.listeners:
                version = await self.deps.store.data_version()
                if last is not None and version != last:
                    self.changes.bump()
                last = version
            else:
                last = None
            with contextlib.suppress(TimeoutError):  # idle (no page open): look rarely
                await asyncio.wait_for(stop.wait(), WATCH_S if self.changes.listeners else 5.0)
        self.changes.close()

    async def _poke(self, request: Request) -> Response:
        self.pokes += 1
        self.on_change()
        self.on_poke()
        return Response(status_code=204)

    async def _events(self, request: Request) -> Response:
        changes = self.changes

        async def stream() -> Any:
            changes.listeners += 1
            try:
                seen = changes.version
                yield f"retry: 2000\nevent: hello\ndata: {seen}\n\n"
                while not changes.closed:
                    now = await changes.wait(seen, KEEPALIVE_S)
                    if changes.closed:
                        return
                    if now == seen:
                        yield ": keepalive\n\n"
                        continue
                    seen = now
                    yield f"event: change\ndata: {now}\n\n"
            finally:
                changes.listeners -= 1

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    def _site(self, request: Request) -> Site:
        site = request.app.state.site
        assert isinstance(site, Site)
        return site

    async def _api_daemon(self, request: Request) -> Response:
        """What this daemon serves, as it is (the config on disk may differ until a restart):
        `agentd web` asks it before printing a URL."""
        web = self.pages_on() and self.port is not None
        return _json({"pid": os.getpid(), "port": self.port, "web": web, "socket": self.unix,
                      "port_failed": self.port_failed,
                      "database_outage": self.deps.store.outage})  # fmt: skip

    async def _api_hooks(self, request: Request) -> Response:
        """What each inbound hook has seen, kept across restarts (`agentd hooks`)."""
        return _json({"hooks": (await self.hooks.loaded()).as_json() if self.hooks else {}})

    async def _api_inbox(self, request: Request) -> Response:
        show_all = request.query_params.get("all") in ("1", "true")
        site = self._site(request)
        try:
            paged = params.paging(request)
        except ValueError as e:
            return _json({"error": str(e)}, 400)
        if paged is not None:  # ?limit=N&after=ID: a page, with the total and the next `after`
            page = await site.call(lambda s: data.inbox_page(s, show_all, *paged))
            return _json({"items": page.rows, "total": page.total, "next_after": page.next_after})
        return _json(await site.call(lambda s: data.inbox_items(s, show_all=show_all)))

    async def _api_item(self, request: Request) -> Response:
        item_id = int(request.path_params["item_id"])
        item, _ = await self._site(request).call(lambda s: data.item_with_goal(s, item_id))
        return _json(item)

    async def _api_goals(self, request: Request) -> Response:
        try:
            paged = params.paging(request)
        except ValueError as e:
            return _json({"error": str(e)}, 400)
        if paged is not None:
            page = await self._site(request).call(lambda s: data.goals_page(s, *paged))
            return _json({"goals": page.rows, "total": page.total, "next_after": page.next_after})
        return _json(await self._site(request).call(data.all_goals))

    async def _api_goal(self, request: Request) -> Response:
        goal_id = int(request.path_params["goal_id"])
        cfg = self.deps.config
        return _json(await self._site(request).call(lambda s: data.goal_json(s, cfg, goal_id)))

    async def _api_run(self, request: Request) -> Response:
        run_id = int(request.path_params["run_id"])
        return _json(await self._site(request).call(lambda s: data.run_json(s, run_id)))


def _hooks_beside(hooks: Receiver | None, app: ASGIApp) -> ASGIApp:
    """`/hooks/NAME` goes to the inbound hooks, which authenticate each sender themselves (no
    Bearer token, no session: a sender proves itself by the hook's own token or signature)."""

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        is_hook = scope["type"] == "http" and scope["path"].startswith(hooks_receiver.PREFIX)
        await (hooks if is_hook and hooks is not None else app)(scope, receive, send)

    return routed


async def _body_refused(request: Request, exc: Exception) -> Response:
    """A form's body over its limit or cut short (agentd/web/bodies.py): said, and closed."""
    status = exc.status if isinstance(exc, bodies.BodyRefused) else 400
    return PlainTextResponse(str(exc), status)


async def _not_found(request: Request, exc: Exception) -> Response:
    """No such item, goal, run or route: JSON for the API, a page a browser user reads (what is
    missing, the way back; never a command to run) for the rest."""
    path = request.url.path
    if path.startswith("/api/"):
        return _json({"error": str(exc) if isinstance(exc, NotFound) else f"no route {path}"}, 404)
    return Response(html.not_found_page(path), 404, media_type="text/html")
