"""The mcp source: read an app's resources and read-only tools over MCP on each look.

What the app returns is world state: JSON stays JSON, other text stays text, cut to `max_bytes`
in all (what was cut is named in `truncated`). Prompts quote it as data like every observation.
A look that cannot be made (the server does not start or answer in `timeout_s`, a read is
refused, a tool is not marked read-only, a secret is missing) is `check_failed`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agentd.config import McpSource, secret
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside import mcp_client as client
from agentd.outside.process import DEFAULT_ENV


class McpSourceReader:
    def __init__(
        self,
        name: str,
        cfg: McpSource,
        base_env: Mapping[str, str] | None = None,
        secrets: Callable[[str], str | None] = secret,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.base_env: Mapping[str, str] = DEFAULT_ENV if base_env is None else base_env
        self.lookup = secrets  # the daemon's variable NAME → its value (config.secret)

    async def observe(self) -> JSON:
        try:
            endpoint = client.endpoint_for(self.cfg, self.base_env, self.lookup)
            items = await client.read(
                endpoint, self.cfg.resources, self.cfg.tools, self.cfg.timeout_s
            )
        except ActionFailed as e:
            return {"ok": False, "check_failed": True, "error": str(e)}
        return {"ok": True, **within(items, self.cfg.max_bytes)}


def within(items: list[tuple[str, str, Any]], max_bytes: int) -> JSON:
    """`{"resources": {uri: content}, "tools": {name: content}}` holding at most `max_bytes` of
    JSON in all, in the order configured; an item over the rest of the budget is kept as its
    JSON text cut short (and named in `truncated`), items after it as nothing."""
    out: JSON = {"resources": {}, "tools": {}}
    left = max_bytes
    cut: list[str] = []
    for kind, name, content in items:
        if isinstance(content, list) and len(content) == 1:
            content = content[0]  # a resource's usual single content, without the list
        spelled = json.dumps(content, ensure_ascii=False, sort_keys=True).encode()
        if len(spelled) <= left:
            out[f"{kind}s"][name] = content
            left -= len(spelled)
            continue
        cut.append(name)
        if left > 0:
            out[f"{kind}s"][name] = spelled[:left].decode(errors="ignore") + "…"
        left = 0
    if cut:
        out["truncated"] = cut
    return {k: v for k, v in out.items() if v}
