"""The control API inside the daemon: its unix socket (0600), the Bearer token, the JSON API's
shapes, and the poke that wakes an answered run at once while the database scan sleeps."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.db import poke as poking
from agentd.db.store import SyncStore
from agentd.models import StepKind
from agentd.operator import inbox
from tests.conftest import Home, closed_port, finished, wait_for, waiting

# A safety net of 60 s: only the poke can make the daemon act within the test's time.
CONFIG = """
[daemon]
poll_interval_s = 0.02

[api]
safety_scan_s = 60

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish", "ask"]
"""
ASK = {"reason": "need it", "action": {"kind": "ask", "question": "which region?"}}
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def client(home: Home, token: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.AsyncHTTPTransport(uds=str(home.paths.api_sock))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


async def asked(home: Home, serve: Any) -> tuple[int, Any]:
    home.write_config(CONFIG, [ASK, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return run_id, item


async def test_api_socket_and_token_are_private(home: Home, serve: Any) -> None:
    await asked(home, serve)
    assert stat.S_ISSOCK(home.paths.api_sock.stat().st_mode)
    assert stat.S_IMODE(home.paths.api_sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.paths.api_token.stat().st_mode) == 0o600


async def test_api_requires_the_bearer_token(home: Home, serve: Any) -> None:
    await asked(home, serve)
    async with client(home) as c:
        assert (await c.get("/api/inbox")).status_code == 401
    async with client(home, "wrong") as c:
        assert (await c.get("/api/inbox")).status_code == 401
    token = home.paths.api_token.read_text().strip()
    async with client(home, token) as c:
        assert (await c.get("/api/inbox")).status_code == 200


async def test_api_json_shapes(home: Home, serve: Any) -> None:
    run_id, item = await asked(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with client(home, token) as c:
        items = (await c.get("/api/inbox")).json()
        goals = (await c.get("/api/goals")).json()
        goal = (await c.get(f"/api/goals/{item.goal_id}")).json()
        run = (await c.get(f"/api/runs/{run_id}")).json()
        missing = await c.get("/api/runs/999")
    assert [i["item_id"] for i in items] == [item.item_id]
    assert items[0]["kind"] == "question" and items[0]["status"] == "open"
    assert items[0]["created_at"].endswith("Z")
    assert [g["goal_id"] for g in goals] == [item.goal_id]
    assert {"runs", "spend", "checkin", "why"} <= set(goal)
    assert run["run_id"] == run_id and run["status"] == "waiting"
    assert {"goal", "spend", "steps"} <= set(run) and run["steps"]
    assert missing.status_code == 404 and "error" in missing.json()


async def test_api_poke_only_on_the_unix_socket_and_host_checked(home: Home, serve: Any) -> None:
    await asked(home, serve)
    async with client(home) as c:
        assert (await c.post("/poke")).status_code == 204
        evil = await c.get("/login", headers={"Host": "evil.example:8765"})
    assert evil.status_code == 400


async def test_api_poke_wakes_an_answered_run_within_milliseconds(home: Home, serve: Any) -> None:
    run_id, item = await asked(home, serve)
    writer = SyncStore(home.paths.db)
    try:
        inbox.answer(writer, item.item_id, "eu-west-1")  # commits, then pokes
    finally:
        writer.close()
    await wait_for(lambda: any(s.kind == StepKind.WAKE for s in home.steps(run_id)), 30)
    answered = home.store.read(lambda c: qi.get_item(c, item.item_id)).resolved_at
    (wake,) = [s for s in home.steps(run_id) if s.kind == StepKind.WAKE]
    latency_ms = (wake.created_at - answered).total_seconds() * 1000
    print(f"\nanswer committed → wake step journaled: {latency_ms:.1f} ms (safety scan: 60 s)")
    assert latency_ms < 30_000  # the scan alone would have taken 60 s
    await wait_for(finished(home, run_id))


def test_api_poke_is_silent_when_no_daemon_listens(tmp_path: Path) -> None:
    assert poking.poke(tmp_path / "api.sock") is False  # no socket at all
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # a socket file nobody listens on (a daemon killed with SIGKILL)
    started = time.monotonic()
    assert poking.poke(stale, timeout_s=30) is False
    assert time.monotonic() - started < 30  # refused at once, not waited out


def test_api_cli_write_works_with_the_daemon_down(home: Home) -> None:
    home.write_config(CONFIG, [ASK, FINISH])
    home.add_goal()
    home.paths.api_sock.write_text("")  # a leftover path that is not even a socket
    started = time.monotonic()
    done = CliRunner().invoke(app, ["--home", str(home.root), "runs", "start", "1"])
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < 30  # no wait on a socket nobody answers
    assert "no daemon serves this home" in done.output
    assert home.run(1).goal_id == 1


async def test_api_serves_mcp_over_streamable_http_behind_the_token(home: Home, serve: Any) -> None:
    """/mcp on the daemon's local API (issue 12): the same MCP server as `agentd mcp`, over
    streamable HTTP, refused without the Bearer token."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.conftest import closed_port

    port = closed_port()
    with_port = CONFIG.replace("[api]\n", f"[api]\nport = {port}\n")
    home.write_config(with_port, [FINISH])
    goal = home.add_goal(title="find a backend job")
    await serve()
    url = f"http://127.0.0.1:{port}/mcp"
    async with httpx2.AsyncClient() as anonymous:
        refused = await anonymous.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401
    token = home.paths.api_token.read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.read_resource("agentd://goals")
        goals = json.loads(listed.contents[0].text)  # type: ignore[union-attr]
    assert goal in [g["goal_id"] for g in (goals["goals"] if isinstance(goals, dict) else goals)]


async def test_api_poke_over_tcp_is_not_found(home: Home, serve: Any) -> None:
    """Only the unix socket (0600: the home's owner) pokes; on the 127.0.0.1 port, which any
    local user or a browser's page can reach, /poke does not exist."""
    port = closed_port()
    home.write_config(CONFIG.replace("[api]\n", f"[api]\nport = {port}\n"), [FINISH])
    await serve()
    token = home.paths.api_token.read_text().strip()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as tcp:
        anonymous = await tcp.post("/poke")
        with_token = await tcp.post("/poke", headers={"Authorization": f"Bearer {token}"})
    assert anonymous.status_code == 404 and with_token.status_code == 404
    async with client(home) as unix:
        assert (await unix.post("/poke")).status_code == 204


def _get_keep_alive(home: Home, path: str) -> tuple[socket.socket, bytes]:
    """A GET over the unix socket on a connection left open (HTTP/1.1 keep-alive): the server
    has accepted it and holds it when this returns (run it off the daemon's loop)."""
    token = home.paths.api_token.read_text().strip()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(10)
        s.connect(str(home.paths.api_sock))
        request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"
        s.sendall(request.encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(65536)
        head, body = reply.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += s.recv(65536)
    except BaseException:
        s.close()
        raise
    return s, body


async def test_api_cancelled_daemon_closes_its_listeners_and_connections(
    home: Home, serve: Any
) -> None:
    """A daemon task cancelled (an in-process kill) closes what its API opened before it ends:
    the accepted connections (the peer reads EOF at once; no transport is left to the garbage
    collector) and the listeners with their registrations in the loop, so the next daemon in the
    same loop, whose listener may get the same file descriptor, is reached."""
    home.write_config(CONFIG, [FINISH])
    first = await serve()
    kept, body = await asyncio.to_thread(_get_keep_alive, home, "/api/daemon")
    with kept:
        assert json.loads(body)["socket"] is True
        first.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first.task
        kept.setblocking(False)  # the server's end is closed already: EOF now, not "would block"
        assert kept.recv(1) == b""
    assert not home.paths.api_sock.exists()
    gc.collect()  # a transport or socket left open would warn here (filterwarnings = error)
    await serve()  # same loop: a stale registration of the old listener's fd would deafen this one
    again, body = await asyncio.to_thread(_get_keep_alive, home, "/api/daemon")
    again.close()
    assert json.loads(body)["socket"] is True
