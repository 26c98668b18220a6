"""The http source: one GET or HEAD of a URL, reported as status, latency and a body excerpt.

An unreachable endpoint is an observation (`ok: false` with the error), never an exception.
"""

from __future__ import annotations

import asyncio
import codecs
import time

import httpx

from agentd.config import HttpSource
from agentd.models import JSON


class HttpSourceReader:
    def __init__(
        self, name: str, cfg: HttpSource, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.transport = transport

    async def observe(self) -> JSON:
        started = time.monotonic()
        try:
            # httpx's timeout bounds each phase; asyncio.timeout bounds the whole exchange.
            async with (
                asyncio.timeout(self.cfg.timeout_s),
                httpx.AsyncClient(timeout=self.cfg.timeout_s, transport=self.transport) as client,
                client.stream(self.cfg.method, self.cfg.url) as response,
            ):
                excerpt = await _read_excerpt(response, self.cfg.body_excerpt_bytes)
        except (TimeoutError, httpx.TimeoutException):
            return {"ok": False, "error": f"timed out after {self.cfg.timeout_s:g}s"}
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
        return {
            "status": response.status_code,
            "ok": 200 <= response.status_code < 400,
            "latency_ms": round((time.monotonic() - started) * 1000, 1),
            "body": excerpt,
        }


async def _read_excerpt(response: httpx.Response, limit_bytes: int) -> str:
    """At most the first `limit_bytes` of the body, decoded; the rest is never downloaded.

    The same as agentd.actions.http's: sources may not import actions (DESIGN.md §5).
    """
    buf = bytearray()
    complete = True
    if limit_bytes > 0:
        async for chunk in response.aiter_bytes():
            buf += chunk
            if len(buf) > limit_bytes:
                complete = False
                break
    try:
        decoder = codecs.getincrementaldecoder(response.charset_encoding or "utf-8")("replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
    # Not final when cut: a multi-byte character split by the cut is dropped, not garbled.
    return decoder.decode(bytes(buf[:limit_bytes]), final=complete)
