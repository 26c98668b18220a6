"""The daemon's /mcp is built at its first request (agentd/api/mcp_mount.py): starting a daemon
does not load the MCP SDK (most of its import time), requests that arrive together share one
start, and a start that fails is answered 503 and tried again by the next request. The endpoint
itself (token, body bound, sessions) is tested in test_api.py and test_api_bodies.py."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentd.api import mcp_mount
from agentd.web.guard import MCP_PATH


def test_api_starting_a_daemon_does_not_import_the_mcp_sdk() -> None:
    code = ("import sys, agentd.daemon.serve; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class FakeSdk:
    """agentd.mcp.server's stand-in: `build` fails `fail` times, then gives a server whose
    endpoint answers `ok`; counts the builds and the session managers running."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.builds = 0
        self.running = 0

    def build(self, paths: Any, config: Any, *, watch: bool) -> Any:
        assert watch is False
        if self.fail:
            self.fail -= 1
            raise OSError("the database is locked")
        self.builds += 1

        @contextlib.asynccontextmanager
        async def run() -> AsyncIterator[None]:
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1

        endpoint = PlainTextResponse("ok")
        app = SimpleNamespace(routes=[Route(MCP_PATH, endpoint)])
        return SimpleNamespace(streamable_http_app=lambda streamable_http_path: app,
                               session_manager=SimpleNamespace(run=run))  # fmt: skip


@pytest.mark.parametrize("fail", [0, 1])
async def test_api_mcp_starts_once_at_its_first_request(
    monkeypatch: pytest.MonkeyPatch, fail: int
) -> None:
    sdk = FakeSdk(fail)
    monkeypatch.setattr(mcp_mount, "_sdk", lambda: sdk)
    lazy = mcp_mount.LazyMcp(None, lambda: None)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=lazy)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        async with lazy.serving():
            assert sdk.builds == 0  # nothing built before a request
            if fail:
                refused = await c.post(MCP_PATH)
                assert refused.status_code == 503
                assert "could not start (the database is locked)" in refused.text
            answers = await asyncio.gather(*(c.post(MCP_PATH) for _ in range(5)))
            assert [a.text for a in answers] == ["ok"] * 5
            assert sdk.builds == 1 and sdk.running == 1
        assert sdk.running == 0  # the sessions end with the server
