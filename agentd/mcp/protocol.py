"""Where agentd's MCP answers differ from the SDK's defaults (agentd/mcp/server.py's `Server`
applies them): a result with structured content carries it as text too, an argument error is one
sentence naming the argument, and a missing resource answers the code of the protocol version
the client speaks."""

from __future__ import annotations

import json

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

# Resource not found: -32002 up to 2025-11-25 (the spec of those versions); from 2026-07-28
# -32602, invalid params (SEP-2164 retired -32002). Versions before 2026 start with a handshake.
LEGACY_RESOURCE_NOT_FOUND = -32002
_KINDS = {str: "a string", bool: "true or false", int: "a number", float: "a number",
          list: "a list", dict: "an object", type(None): "null"}  # fmt: skip


def not_found_code(protocol_version: str | None) -> int:
    """The error code of a resource that does not exist, as `protocol_version` spells it."""
    legacy = protocol_version is None or protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
    return LEGACY_RESOURCE_NOT_FOUND if legacy else types.INVALID_PARAMS


def argument_error(tool: str, error: ValidationError) -> str:
    """One sentence for arguments that do not fit a tool's input schema, naming each argument
    and what it takes (never echoing the value: it is the caller's data)."""
    problems = []
    for e in error.errors():
        name = ".".join(str(p) for p in e["loc"]) or "(the arguments)"
        if e["type"] == "missing":
            problems.append(f"argument {name} is missing")
            continue
        said = e["msg"].removeprefix("Value error, ")
        if said.startswith("Input should be a valid "):  # the type: "(got …)" says the rest
            said = said.removeprefix("Input ").split(", ")[0]
        else:  # a constraint: "String should have at least 1 character"
            said = f"is invalid: {said[:1].lower()}{said[1:]}"
        got = _KINDS.get(type(e.get("input")), "a value of another type")
        problems.append(f"argument {name} {said} (got {got})")
    return f"{tool} was not run: {'; '.join(problems)}"


def as_text(result: types.CallToolResult) -> types.CallToolResult:
    """A result with structured content also carries that JSON as its one text block (the MCP
    spec's advice for clients that show text only)."""
    if result.is_error or result.structured_content is None:
        return result
    text = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
    return result.model_copy(update={"content": [types.TextContent(type="text", text=text)]})
