"""The http source: one GET or HEAD of a URL, reported as status, latency and a body excerpt.

An unreachable endpoint is an observation (`ok: false` with the error), never an exception.
"""

from __future__ import annotations

import httpx

from agentd.config import HttpSource
from agentd.fetch import exchange
from agentd.models import JSON


class HttpSourceReader:
    def __init__(
        self, name: str, cfg: HttpSource, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.transport = transport

    async def observe(self) -> JSON:
        return await exchange(
            self.cfg.method,
            self.cfg.url,
            timeout_s=self.cfg.timeout_s,
            excerpt_bytes=self.cfg.body_excerpt_bytes,
            transport=self.transport,
        )
