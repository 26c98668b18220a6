"""agentd as an MCP client: one short connection to an app's MCP server per look or per call.

The only module that imports the MCP SDK's client side. A connection starts the server (stdio:
argv, no shell, in its own session) or opens a streamable HTTP session with a bearer token,
does its reads or its one call, and closes, all inside one task and one timeout: a long-lived
session would have to be kept alive, reconnected and fenced across crashes, and a look is rare.

Every failure to get an answer is `ActionFailed` with a message free of secrets; a failure after
a tool call was sent is not an exception but a `Called` whose outcome is unknown, since the
server may have carried it out.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentd.config import McpServerRef
from agentd.errors import ActionFailed
from agentd.models import JSON


@dataclass(frozen=True)
class Endpoint:
    """A server, its secrets already read (by the caller, through `config.secret`)."""

    argv: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # the whole child environment
    cwd: Path | None = None
    token: str | None = field(default=None, repr=False)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)  # NAME → value, scrubbed

    @property
    def where(self) -> str:
        return self.url if self.url is not None else " ".join(self.argv or [])


def endpoint_for(
    cfg: McpServerRef, base_env: Mapping[str, str], lookup: Callable[[str], str | None]
) -> Endpoint:
    """The server of a config table with its secrets read now (`lookup` is `config.secret`);
    ActionFailed names a variable that is not set, never a value."""
    values = {}
    for name in cfg.secret_names():
        value = lookup(name)
        if value is None:
            raise ActionFailed(f"secret ${name} is not set in agentd's environment")
        values[name] = value
    if cfg.url is not None:
        token = values.get(cfg.token_env) if cfg.token_env else None
        return Endpoint(url=cfg.url, token=token, secrets=values)
    env = {**base_env, **cfg.env, **{child: values[n] for child, n in cfg.secret_env.items()}}
    return Endpoint(argv=cfg.argv, env=env, cwd=cfg.cwd, secrets=values)


@dataclass(frozen=True)
class Called:
    """What became of one tool call: `sent` says whether the request left agentd (after that,
    a failure leaves the outcome unknown); `result` is the tool's answer, when one came."""

    sent: bool
    result: JSON | None = None
    error: str | None = None


async def read(
    endpoint: Endpoint, resources: list[str], tools: dict[str, JSON], timeout_s: float
) -> list[tuple[str, str, Any]]:
    """(kind, name, content) of each resource and read-only tool, in the order configured.

    A tool the server does not annotate `readOnlyHint: true` is refused: a look must not be
    able to change the world, and MCP's default for an unannotated tool is "may write"."""
    out: list[tuple[str, str, Any]] = []
    async with _session(endpoint, timeout_s) as client:
        for uri in resources:
            got = await _guarded(endpoint, f"reading {uri}", client.read_resource(uri))
            out.append(("resource", uri, [_content(c) for c in got.contents]))
        if tools:
            listed = {t.name: t for t in await _tools(endpoint, client)}
            for name, arguments in tools.items():
                tool = listed.get(name)
                if tool is None:
                    raise ActionFailed(f"the server has no tool {name!r}")
                if tool.annotations is None or tool.annotations.read_only_hint is not True:
                    raise ActionFailed(
                        f"tool {name!r} is not marked read-only (readOnlyHint) by the server; "
                        "a source calls only read-only tools — use an mcp_tool action instead"
                    )
                res = await _guarded(endpoint, f"calling {name}", client.call_tool(name, arguments))
                if res.is_error:
                    raise ActionFailed(f"tool {name!r} failed: {_text(res)[:300]}")
                out.append(("tool", name, _result(res)))
    return out


async def call(
    endpoint: Endpoint,
    tool: str,
    prepare: Callable[[JSON], JSON],
    timeout_s: float,
) -> Called:
    """Call `tool` once. `prepare` gets the tool's input schema as the server lists it now and
    returns the arguments to send (raising ActionFailed to send nothing)."""
    sent = False
    result: JSON | None = None
    error: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with _connected(endpoint) as client:
                listed = {t.name: t for t in await _tools(endpoint, client)}
                if tool not in listed:
                    raise ActionFailed(f"the server has no tool {tool!r} (it has: "
                                       f"{', '.join(sorted(listed)) or 'none'})")  # fmt: skip
                arguments = prepare(dict(listed[tool].input_schema))
                sent = True
                res = await client.call_tool(tool, arguments)
                result = {"is_error": res.is_error, **_result(res)}
    except TimeoutError:
        error = f"no answer from the MCP server within {timeout_s:g}s"
    except Exception as e:  # the SDK and its transports raise many kinds, often grouped
        leaf = _leaf(e)
        if isinstance(leaf, ActionFailed) and not sent:
            raise leaf from None
        error = str(leaf) if isinstance(leaf, ActionFailed) else _failure(endpoint, leaf)
    if result is not None:  # the answer came: a failure while closing changes nothing
        return Called(sent=True, result=result)
    if not sent:
        raise ActionFailed(error or "no answer")
    return Called(sent=True, error=error)


@asynccontextmanager
async def _session(endpoint: Endpoint, timeout_s: float) -> AsyncIterator[Client]:
    """A connection whose every failure, the timeout included, is ActionFailed."""
    try:
        async with asyncio.timeout(timeout_s):
            async with _connected(endpoint) as client:
                yield client
    except TimeoutError:
        raise ActionFailed(f"no answer from the MCP server within {timeout_s:g}s") from None
    except Exception as e:  # the SDK and its transports raise many kinds, often grouped
        if isinstance(leaf := _leaf(e), ActionFailed):
            raise leaf from None
        raise ActionFailed(_failure(endpoint, leaf)) from None


@asynccontextmanager
async def _connected(endpoint: Endpoint) -> AsyncIterator[Client]:
    # No response cache: every look must read the server's state now.
    if endpoint.argv is not None:
        params = StdioServerParameters(
            command=endpoint.argv[0], args=endpoint.argv[1:], env=endpoint.env, cwd=endpoint.cwd
        )
        # The server's stderr is the daemon's (its log); stdout carries only the protocol.
        async with Client(stdio_client(params, errlog=sys.stderr), cache=None) as client:
            yield client
        return
    assert endpoint.url is not None
    headers = {"Authorization": f"Bearer {endpoint.token}"} if endpoint.token else {}
    refused: list[int] = []  # the SDK's errors do not carry the HTTP status: noted here

    async def note(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused.append(response.status_code)

    hooks: Any = {"response": [note]}
    try:
        async with httpx2.AsyncClient(headers=headers, event_hooks=hooks) as http:
            transport = streamable_http_client(endpoint.url, http_client=http)
            async with Client(transport, cache=None) as client:
                yield client
    except Exception as e:
        if not refused or isinstance(_leaf(e), ActionFailed):
            raise
        hint = " (is the token in token_env valid?)" if refused[-1] in (401, 403) else ""
        raise ActionFailed(f"MCP server {endpoint.url} answered HTTP {refused[-1]}{hint}") from None


async def _tools(endpoint: Endpoint, client: Client) -> list[types.Tool]:
    """Every tool the server lists (all pages, bounded)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(20):
        page = await _guarded(endpoint, "listing tools", client.list_tools(cursor=cursor))
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _guarded(endpoint: Endpoint, doing: str, request: Any) -> Any:
    """An MCP error answer (a protocol-level refusal) named for the operator."""
    try:
        return await request
    except MCPError as e:
        raise ActionFailed(_scrub(endpoint, f"{doing}: {e.error.message}")) from None


def _content(c: types.TextResourceContents | types.BlobResourceContents) -> Any:
    if isinstance(c, types.TextResourceContents):
        return _maybe_json(c.text)
    size = len(base64.b64decode(c.blob, validate=False))
    return {"blob_bytes": size, "mime_type": c.mime_type}


def _result(res: types.CallToolResult) -> JSON:
    if res.structured_content is not None:
        return {"structured": res.structured_content}
    return {"content": _maybe_json(_text(res))}


def _text(res: types.CallToolResult) -> str:
    parts = [b.text for b in res.content if isinstance(b, types.TextContent)]
    other = len(res.content) - len(parts)
    return "\n".join(parts) + (f"\n[{other} non-text blocks not shown]" if other else "")


def _maybe_json(text: str) -> Any:
    """Structured data stays structured in prompts (JSON text is parsed); other text as is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def _leaf(e: BaseException) -> BaseException:
    """The first failure inside (nested) exception groups: anyio task groups wrap what is
    raised in them, ours included."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _failure(endpoint: Endpoint, e: BaseException) -> str:
    return _scrub(endpoint, f"MCP server {endpoint.where}: {_describe(e)}")


def _describe(e: BaseException) -> str:
    """A failure as `Type: message`, cut short."""
    text = str(e).strip() or "(no detail)"
    return f"{type(e).__name__}: {text[:300]}"


def _scrub(endpoint: Endpoint, message: str) -> str:
    for name, value in sorted(endpoint.secrets.items(), key=lambda kv: -len(kv[1])):
        if value:
            message = message.replace(value, f"[secret:{name}]")
    return message
