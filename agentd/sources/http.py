"""The http source: one GET or HEAD of a URL, reported as status, latency and a body excerpt.

An unreachable endpoint is an observation (`ok: false` with the error), never an exception. Only
a request that cannot even be made is `check_failed` (see `agentd.sources.state_of`): a URL httpx
cannot parse, or a host name that does not resolve. A refused connection, a timeout or a reset
on a URL that resolves is the service being down: `unhealthy`.
"""

from __future__ import annotations

import asyncio
import socket

import httpx

from agentd.config import HttpSource
from agentd.models import JSON
from agentd.outside.fetch import exchange


class HttpSourceReader:
    def __init__(
        self, name: str, cfg: HttpSource, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.transport = transport

    async def observe(self) -> JSON:
        try:
            url = httpx.URL(self.cfg.url)
        except httpx.InvalidURL as e:
            return broken(f"InvalidURL: {e}")
        if url.scheme not in ("http", "https") or not url.host:
            return broken(f"not an http(s) URL with a host: {self.cfg.url!r}")
        seen = await exchange(
            self.cfg.method,
            self.cfg.url,
            timeout_s=self.cfg.timeout_s,
            excerpt_bytes=self.cfg.body_excerpt_bytes,
            transport=self.transport,
        )
        # Which failure to connect was it? Only one that resolves nothing is the check's.
        refused = "status" not in seen and str(seen.get("error", "")).startswith("ConnectError")
        port = url.port or (443 if url.scheme == "https" else 80)
        if refused and (problem := await unresolvable(url.host, port, self.cfg.timeout_s)):
            return broken(problem)
        return seen


def broken(error: str) -> JSON:
    """The observation of a check that could not be made at all."""
    return {"ok": False, "check_failed": True, "error": error}


async def unresolvable(host: str, port: int, timeout_s: float) -> str | None:
    """Why `host` resolves to no address, or None when it resolves (or resolution hangs: a slow
    resolver is no proof the name is wrong)."""
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"cannot resolve host {host!r}: {e.strerror or e}"
    except (TimeoutError, OSError):
        return None
    return None
