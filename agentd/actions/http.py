"""The http action: one request to a URL on the action's allowlist, carrying an Idempotency-Key.

The requested `url` must equal one of `cfg.urls` once the params are filled in (URL-quoted), so a
param can never steer the request to another host or path. Redirects are not followed.
"""

from __future__ import annotations

import urllib.parse
from functools import partial

import httpx

from agentd.actions import ActionContext
from agentd.actions.command import fill
from agentd.config import HttpAction
from agentd.errors import ActionFailed
from agentd.fetch import exchange
from agentd.models import JSON

RESERVED_ARGS = frozenset({"url", "method", "body"})
_quote_segment = partial(urllib.parse.quote, safe="")


class HttpExecutor:
    """Sends the request; any HTTP status is a result (`ok` for 2xx/3xx), not an exception."""

    def __init__(
        self, name: str, cfg: HttpAction, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.idempotent = cfg.idempotent
        self.transport = transport

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        method, url, body = self._request(args)
        headers = {"Idempotency-Key": ctx.idempotency_key}
        return await exchange(
            method,
            url,
            timeout_s=self.cfg.timeout_s,
            excerpt_bytes=self.cfg.body_excerpt_bytes,
            content=body,
            headers=headers,
            transport=self.transport,
        )

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """An HTTP endpoint cannot be asked whether a request happened: always unknown."""
        return None

    def _request(self, args: JSON) -> tuple[str, str, str | None]:
        """(method, url, body), re-checked against the config; ActionFailed if off the menu."""
        unknown = sorted(set(args) - RESERVED_ARGS - set(self.cfg.params))
        if unknown:
            raise ActionFailed(f"action {self.name!r} takes no argument {', '.join(unknown)}")
        methods: list[str] = list(self.cfg.methods)
        method = args.get("method", methods[0] if len(methods) == 1 else None)
        if method not in methods:
            raise ActionFailed(
                f"action {self.name!r}: method {method!r} is not one of {', '.join(methods)}"
            )
        body = args.get("body")
        if body is not None and not isinstance(body, str):
            raise ActionFailed(f"action {self.name!r}: body must be a string")
        url = args.get("url")
        if not isinstance(url, str) or url not in self._allowed_urls(args):
            raise ActionFailed(
                f"action {self.name!r}: url {url!r} is not on its allowlist "
                f"({', '.join(self.cfg.urls)}, with params filled in)"
            )
        return method, url, body

    def _allowed_urls(self, args: JSON) -> set[str]:
        allowed = set()
        for template in self.cfg.urls:
            try:
                allowed.add(fill(template, args, self.cfg.params, quote=_quote_segment))
            except ActionFailed:
                continue  # a template whose params were not given cannot match
        return allowed
