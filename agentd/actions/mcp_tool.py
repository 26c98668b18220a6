"""The mcp_tool action: call one named tool of an MCP server with the model's arguments.

The model gives `arguments` (a JSON object). At execution the tool's input schema is fetched from
the server and the arguments — with the idempotency key filled into `idempotency_arg`, which the
model may not set — are validated against it (jsonschema) before anything is sent; a mismatch is
ActionFailed and nothing reaches the server. The tool's answer is the result: `ok` unless the
tool reports an error. A failure after the call was sent (a timeout, a dropped connection) is a
result whose `outcome` is `unknown`: the server may have carried it out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from agentd.actions import ActionContext
from agentd.actions.command import redact
from agentd.config import McpToolAction, schema_mismatch, secret
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside import mcp_client as client
from agentd.outside.process import DEFAULT_ENV


class McpToolExecutor:
    def __init__(
        self,
        name: str,
        cfg: McpToolAction,
        base_env: Mapping[str, str] | None = None,
        secrets: Callable[[str], str | None] = secret,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.idempotent = cfg.idempotent
        self.base_env: Mapping[str, str] = DEFAULT_ENV if base_env is None else base_env
        self.lookup = secrets  # the daemon's variable NAME → its value (config.secret)

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        arguments = args.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ActionFailed(f"action {self.name!r}: arguments must be a JSON object")
        key_arg = self.cfg.idempotency_arg
        if key_arg is not None and key_arg in arguments:
            raise ActionFailed(f"action {self.name!r}: {key_arg} is filled by agentd, not given")
        endpoint = client.endpoint_for(self.cfg, self.base_env, self.lookup)

        def prepare(schema: JSON) -> JSON:
            final = dict(arguments)
            if key_arg is not None:
                if key_arg not in (schema.get("properties") or {}):
                    raise ActionFailed(
                        f"action {self.name!r}: tool {self.cfg.tool!r} takes no argument "
                        f"{key_arg!r} (idempotency_arg); fix the config, nothing was sent"
                    )
                final[key_arg] = ctx.idempotency_key
            if problem := schema_mismatch(schema, final):
                raise ActionFailed(
                    f"action {self.name!r}: the arguments do not fit tool {self.cfg.tool!r}'s "
                    f"input schema: {problem}; nothing was sent"
                )
            return final

        called = await client.call(endpoint, self.cfg.tool, prepare, self.cfg.timeout_s)
        if called.result is None:
            out: JSON = {"ok": False, "tool": self.cfg.tool, "outcome": "unknown"}
            return redact({**out, "error": called.error}, endpoint.secrets)
        result = dict(called.result)
        failed = bool(result.pop("is_error", False))
        return redact(
            {"ok": not failed, "tool": self.cfg.tool, **capped(result, self.cfg.output_bytes)},
            endpoint.secrets,
        )

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """MCP has no way to ask whether a call happened: unknown. A tool that dedupes on the
        idempotency key is declared idempotent instead, and re-sent with the same key."""
        return None

    async def fence(self, ctx: ActionContext, spawned: JSON | None) -> JSON:
        """Nothing to kill: a stdio server runs in its own session and reads EOF when the daemon
        that started it dies (it may still finish the call in flight — the key dedupes a re-send,
        and without one the operator is asked); an HTTP call died with its connection."""
        return {"killed": [], "survivors": []}


def capped(result: JSON, limit: int) -> JSON:
    """The tool's answer, or its JSON text cut to `limit` bytes when longer."""
    spelled = json.dumps(result, ensure_ascii=False, sort_keys=True).encode()
    if len(spelled) <= limit:
        return result
    return {"content": spelled[:limit].decode(errors="ignore") + "…", "truncated": True}
