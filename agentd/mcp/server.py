"""agentd as an MCP server (`agentd mcp`): a goal's context as resources, the operator's everyday
operations as tools, and change notifications — one process over stdio, reading the home's database.

Tools go through the operator layer the CLI uses (agentd/operator/goals.py, inbox.py), so they
validate and refuse exactly as the CLI does; an expected error comes back as a tool error carrying
the CLI's message.
Approvals are human-only: no plain tool approves or denies. With `[mcp] approvals = true` (as
in force now: a reload applies) an `approve` tool asks the person at the client through MCP
elicitation and records that it did.

The process is not the daemon: it notices other processes' commits (the daemon's, the CLI's) by
polling `PRAGMA data_version` on its own connection, then re-reads the watched resources and
notifies for those whose bytes changed — on `subscriptions/listen` streams (2026-07-28) and to
`resources/subscribe` subscribers (earlier protocol versions).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import mcp_types as types
import structlog
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from pydantic import AnyUrl, ValidationError

from agentd import __version__
from agentd.config import Config, Paths
from agentd.errors import AgentdError, NotFound, StateError
from agentd.mcp import context as doc
from agentd.mcp import protocol, tools
from agentd.mcp.config_file import ConfigFile
from agentd.operator import goals, home

T = TypeVar("T")
log = structlog.get_logger("agentd.mcp")
POLL_INTERVAL_S = 0.5  # how often the change counter is read: cheap, and "within a second"
# Runs and artifacts are watched once a client read or subscribed to them, up to this many.
MAX_WATCHED = 500
_TEMPLATES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"agentd://goals/(\d+)"), "goal"),
    (re.compile(r"agentd://goals/(\d+)/runs"), "goal_runs"),
    (re.compile(r"agentd://runs/(\d+)"), "run"),
    (re.compile(r"agentd://artifacts/(\d+)"), "artifact"),
]
_READERS: dict[str, Callable[[home.HomeStore, int], Any]] = {
    "goal_runs": doc.goal_runs,
    "run": doc.run_timeline,
    "artifact": doc.artifact,
}


def _match(uri: str) -> tuple[str | None, int]:
    for pattern, kind in _TEMPLATES:
        if (m := pattern.fullmatch(uri)) is not None:
            return kind, int(m.group(1))
    return None, 0


class Server(MCPServer[Any]):
    """The SDK's MCPServer, with tools a setting turns on (`gate`: asked at every list and call,
    so a reload applies) and the answers of agentd/mcp/protocol.py."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gates: dict[str, Callable[[], str | None]] = {}

    def gate(self, tool: str, closed: Callable[[], str | None]) -> None:
        """`closed()` says why `tool` is off now (None: on); asked at every list and call."""
        self._gates[tool] = closed

    def _closed(self, tool: str) -> str | None:
        check = self._gates.get(tool)
        return None if check is None else check()

    async def list_tools(self) -> list[types.Tool]:
        return [t for t in await super().list_tools() if self._closed(t.name) is None]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        if (why := self._closed(name)) is not None:
            raise ToolError(why)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as e:
            cause = e.__cause__
            # Only the arguments' own model (`<tool>Arguments`): a resolver's is not theirs.
            if isinstance(cause, ValidationError) and cause.title.endswith("Arguments"):
                raise ToolError(protocol.argument_error(name, cause)) from cause
            raise
        return protocol.as_text(result) if isinstance(result, types.CallToolResult) else result

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | types.InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as e:
            version = context.protocol_version if context is not None else None
            raise _not_found(str(uri), str(e), version) from None


def _not_found(uri: str, message: str, protocol_version: str | None) -> MCPError:
    code = protocol.not_found_code(protocol_version)
    return MCPError(code=code, message=message, data={"uri": uri})


class Agentd:
    """One home served over MCP: its store (one connection, one thread at a time), its config as
    it is now, the resources' last digests, and who subscribed to what."""

    def __init__(
        self, paths: Paths, config: Callable[[], Config], poll_interval_s: float = POLL_INTERVAL_S
    ) -> None:
        self.paths, self.config, self.poll_interval_s = paths, config, poll_interval_s
        self._store: home.HomeStore | None = None
        self._lock = anyio.Lock()
        self.bus = InMemorySubscriptionBus()
        self.digests: dict[str, str] = {}
        self.watched: set[str] = set()  # runs and artifacts a client read or subscribed to
        self.sessions: dict[str, set[ServerSession]] = {}  # resources/subscribe (before 2026)
        self.version: int | None = None
        self.bounded = False  # the daemon's /mcp: its reads keep the statement timeout (`build`)

    @property
    def cfg(self) -> Config:
        """The config in force, asked for each time: the daemon's reload swaps it."""
        return self.config()

    @property
    def store(self) -> home.HomeStore:
        """The home's database, opened on first use (never created: `agentd init` does that)."""
        if self._store is None:
            from agentd.config.where import home_store_url

            # A home whose [store] names a PostgreSQL database has no file here.
            if home_store_url(self.paths.home) is None and not self.paths.db.exists():
                raise StateError(f"{self.paths.db}: no database here; run `agentd init`")
            self._store = home.open_store(self.paths.db, bounded=self.bounded)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a store call on a worker thread (a busy database must not stall the protocol)."""
        async with self._lock:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    # ── resources ────────────────────────────────────────────────────────────────────────────

    def render_uri(self, uri: str) -> str:
        """The JSON text of a resource (sync: runs on the store's thread)."""
        s = self.store
        if uri == "agentd://goals":
            return doc.dump(doc.goal_list(s))
        if uri == "agentd://inbox":
            return doc.dump(doc.open_inbox(s))
        if uri == "agentd://schema/goal-context":
            return doc.dump(doc.GoalContext.model_json_schema(by_alias=True))
        kind, n = _match(uri)
        if kind == "goal":
            return doc.dump(doc.goal_context(s, self.cfg, n))
        if kind is not None:
            return doc.dump(_READERS[kind](s, n))
        raise ResourceNotFoundError(f"no agentd resource {uri}; read agentd://goals to start")

    async def read(self, uri: str) -> str:
        try:
            text = await self.db(self.render_uri, uri)
        except NotFound as e:  # no such goal, run or artifact
            raise ResourceNotFoundError(str(e)) from None
        except AgentdError as e:
            raise ResourceError(str(e)) from None
        if (
            uri.startswith(("agentd://runs/", "agentd://artifacts/"))
            and len(self.watched) < MAX_WATCHED
        ):
            self.watched.add(uri)
        self.digests.setdefault(uri, _digest(text))
        return text

    # ── change notifications ─────────────────────────────────────────────────────────────────

    def _candidates(self) -> list[str]:
        ids = [g.goal_id for g in goals.all_goals(self.store)]
        per_goal = [u for i in ids for u in (doc.goal_uri(i), f"{doc.goal_uri(i)}/runs")]
        subscribed = set(self.sessions) | self.watched
        return ["agentd://goals", "agentd://inbox", *per_goal, *sorted(subscribed - set(per_goal))]

    def changed(self) -> list[str] | None:
        """The watched resources whose bytes changed since the last look (None: no commit since).
        Nothing is kept unless every resource was read: a busy database is asked again later."""
        version = home.data_version(self.store)
        if version == self.version:
            return None
        digests: dict[str, str] = {}
        for uri in self._candidates():
            try:
                digests[uri] = _digest(self.render_uri(uri))
            except NotFound:
                digests[uri] = "gone"
        first, self.version = self.version is None, version
        # A resource seen for the first time (a new goal) is not "updated": the goals list
        # changed too, and says so.
        out = [u for u, d in digests.items() if self.digests.get(u, d) != d and not first]
        self.digests.update(digests)
        return out

    async def watch(self) -> None:
        """Poll the change counter; notify for each watched resource whose content changed."""
        while True:
            try:
                uris = await self.db(self.changed)
            except AgentdError as e:  # busy or unreadable for now: say so, look again
                log.warning("mcp.watch_failed", error=str(e))
                uris = None
            for uri in uris or ():
                await self.notify(uri)
            await anyio.sleep(self.poll_interval_s)

    async def notify(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        for session in list(self.sessions.get(uri, ())):
            try:
                await session.send_resource_updated(uri)
            except Exception:  # a client gone: forget its subscription, tell the others
                self.sessions[uri].discard(session)
        if uri == "agentd://goals":
            await self.bus.publish(ResourcesListChanged())
            for session in {s for ss in self.sessions.values() for s in ss}:
                with contextlib.suppress(Exception):
                    await session.send_resource_list_changed()

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        try:
            await self.read(uri)  # an unknown resource is an error now, not silence later
        except ResourceNotFoundError as e:
            raise _not_found(uri, str(e), ctx.protocol_version) from None
        except ResourceError as e:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(e), data={"uri": uri}) from None
        self.sessions.setdefault(uri, set()).add(ctx.session)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.sessions.get(str(params.uri), set()).discard(ctx.session)
        return types.EmptyResult()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build(
    paths: Paths,
    cfg: Config | Callable[[], Config],
    poll_interval_s: float = POLL_INTERVAL_S,
    *,
    watch: bool = True,
) -> MCPServer[Any]:
    """The MCP server for one home (its database must exist: `agentd init`). `cfg`: what returns
    the config in force at each request (the daemon's, which a reload swaps), or the config
    loaded from the home's file, which is then followed as it changes (`agentd mcp`).
    `watch`: poll for changes and notify subscribers — `agentd mcp` does; the daemon's /mcp
    does not (the watch re-reads every goal's document on each commit, which a busy daemon
    commits all the time)."""
    in_force = cfg if callable(cfg) else ConfigFile(paths.config, cfg)
    agentd = Agentd(paths, in_force, poll_interval_s)
    agentd.bounded = not watch  # served by the daemon: its reads bounded as the daemon's are

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[Agentd]:
        async with anyio.create_task_group() as tg:
            if watch:
                tg.start_soon(agentd.watch)
            try:
                yield agentd
            finally:
                tg.cancel_scope.cancel()
        await agentd.db(agentd.close)  # on the store's thread, after the watcher stopped

    mcp = Server(
        "agentd",
        version=__version__,
        instructions="agentd's goals: read agentd://goals, then agentd://goals/{id} (the "
        "goal-context document; schema at agentd://schema/goal-context). Approvals are for the "
        "person, never the model.",
        subscriptions=agentd.bus,
        log_level="WARNING",  # the SDK's own logging, on stderr; stdout is the protocol
        lifespan=lifespan,
    )
    _resources(mcp, agentd)
    tools.register(mcp, agentd)
    # Off by default: then no tool can touch an approval at all. Asked at each request.
    tools.register_approve(mcp, agentd)
    mcp.gate("approve", lambda: None if agentd.cfg.mcp.approvals else tools.APPROVALS_OFF)
    # Before 2026-07-28 clients subscribe per resource; MCPServer serves only the newer
    # `subscriptions/listen`, so the older pair is registered on its low-level server.
    low = mcp._lowlevel_server
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, agentd.subscribe)
    low.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, agentd.unsubscribe
    )
    return mcp


def _resources(mcp: MCPServer[Any], agentd: Agentd) -> None:
    json_type = "application/json"

    @mcp.resource("agentd://goals", name="goals", mime_type=json_type,
                  description="Every goal: id, title, status, deadline, its run in progress.")  # fmt: skip
    async def goals_list() -> str:
        return await agentd.read("agentd://goals")

    @mcp.resource("agentd://inbox", name="inbox", mime_type=json_type,
                  description="Open inbox items: questions, approvals, notices and nudges.")  # fmt: skip
    async def inbox_list() -> str:
        return await agentd.read("agentd://inbox")

    @mcp.resource("agentd://schema/goal-context", name="goal-context schema", mime_type=json_type,
                  description="The JSON schema of the goal-context document.")  # fmt: skip
    async def schema() -> str:
        return await agentd.read("agentd://schema/goal-context")

    @mcp.resource("agentd://goals/{goal_id}", name="goal context", mime_type=json_type,
                  description="The goal-context document: why, criteria, deadline, status, "
                  "memory, recent outcomes, open inbox items, next check-in and why, artifacts.")  # fmt: skip
    async def goal(goal_id: str) -> str:
        return await agentd.read(f"agentd://goals/{goal_id}")

    @mcp.resource("agentd://goals/{goal_id}/runs", name="goal runs", mime_type=json_type,
                  description="A goal's runs, newest first, with status and task_status.")  # fmt: skip
    async def goal_runs(goal_id: str) -> str:
        return await agentd.read(f"agentd://goals/{goal_id}/runs")

    @mcp.resource("agentd://runs/{run_id}", name="run timeline", mime_type=json_type,
                  description="A run: status, task_status, spend and every journaled step.")  # fmt: skip
    async def run(run_id: str) -> str:
        return await agentd.read(f"agentd://runs/{run_id}")

    @mcp.resource("agentd://artifacts/{artifact_id}", name="artifact", mime_type=json_type,
                  description="A build's versions with the judge's verdict on each.")  # fmt: skip
    async def artifact(artifact_id: str) -> str:
        return await agentd.read(f"agentd://artifacts/{artifact_id}")


async def run_stdio(mcp: MCPServer[Any]) -> None:
    """Serve one client over stdin/stdout until it hangs up. Only protocol goes to stdout."""
    low = mcp._lowlevel_server
    # Before 2026-07-28, list-changed support is announced only when asked for.
    options = low.create_initialization_options(NotificationOptions(resources_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await low.run(read_stream, write_stream, options)
