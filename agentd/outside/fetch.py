"""One bounded HTTP exchange: method, URL, timeout, excerpt.

Shared by the http action and the http source, which may not import each other (pyproject.toml's
import-linter layers).
Any HTTP status is a result and a failure to get one is `ok: false` with the error, never a raise.
Redirects are not followed: a 3xx is what came back, and each caller says whether that is `ok`.
"""

from __future__ import annotations

import asyncio
import codecs
import time
from collections.abc import Mapping

import httpx

from agentd.models import JSON


async def exchange(
    method: str,
    url: str,
    *,
    timeout_s: float,
    excerpt_bytes: int,
    content: str | None = None,
    headers: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    ok_statuses: range = range(200, 400),
) -> JSON:
    """`ok` (a status in `ok_statuses`: the http source counts 2xx/3xx as healthy, the http action
    only 2xx), `status`, `latency_ms` and a `body` excerpt; or `ok: false` with `error`."""
    started = time.monotonic()
    try:
        # httpx's timeout bounds each phase; asyncio.timeout bounds the whole exchange.
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(timeout=timeout_s, transport=transport) as client,
            client.stream(method, url, content=content, headers=headers) as response,
        ):
            excerpt = await read_excerpt(response, excerpt_bytes)
    except (TimeoutError, httpx.TimeoutException):
        return {"ok": False, "error": f"timed out after {timeout_s:g}s"}
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return {
        "ok": response.status_code in ok_statuses,
        "status": response.status_code,
        "latency_ms": round((time.monotonic() - started) * 1000, 1),
        "body": excerpt,
    }


async def read_excerpt(response: httpx.Response, limit_bytes: int) -> str:
    """At most the first `limit_bytes` of the body, decoded; the rest is never downloaded."""
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
