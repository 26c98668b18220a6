"""The daemon's /mcp answers with the config in force: a real `agentd serve`, its config changed
and `agentd reload` run, then /mcp driven by the SDK's own client over streamable HTTP — the
`approve` tool, add_goal's agents and accept_nudge's argument checks all follow the reload."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.conftest import Home, closed_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

RESTART = {"reason": "restart it", "action": {"kind": "restart", "unit": "a.service"}}
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def config_text(port: int, *, approvals: bool, agents: list[str], units: list[str]) -> str:
    """One model, a `restart` action gated by approval (its unit one of `units`), and `agents`."""
    choices = ", ".join(f'"{u}"' for u in units)
    tables = "".join(
        f'\n[agents.{name}]\nactions = ["ask", "finish", "restart"]\n'
        f'[agents.{name}.policy]\nrules = {{ restart = "approve" }}\n'
        f"[agents.{name}.checkin]\nenabled = false\n"
        for name in agents
    )
    return (
        f"[daemon]\npoll_interval_s = 0.05\n\n[api]\nport = {port}\n\n"
        f"[mcp]\napprovals = {'true' if approvals else 'false'}\n\n"
        '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
        '[actions.restart]\ntype = "command"\nargv = ["true", "{unit}"]\n'
        f"params = {{ unit = {{ choices = [{choices}] }} }}\n{tables}"
    )


@contextlib.contextmanager
def daemon(home: Home) -> Iterator[Path]:
    """A real `agentd serve` on the home, until its API listens; killed (its group) at the end.
    Yields its log (JSON lines)."""
    log = home.root / "daemon.log"
    env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd", "--home", str(home.root), "serve"],
            stdout=out, stderr=out, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        wait_log(proc, log, '"api.listening"')
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_log(proc: subprocess.Popen[bytes], log: Path, marker: str, count: int = 1) -> None:
    deadline = time.monotonic() + 60
    while log.read_text().count(marker) < count:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {marker} in the daemon's log:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)


async def wait_until(check: Any) -> None:
    with anyio.fail_after(60):
        while not check():
            await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def over_http(home: Home, port: int, **kwargs: Any) -> AsyncIterator[Client]:
    """The SDK's client on the daemon's /mcp, with the API's Bearer token."""
    token = home.paths.api_token.read_text().strip()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), **kwargs) as client,
    ):
        yield client


async def person_grants(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person at the client says yes to whatever is asked."""
    return types.ElicitResult(action="accept", content={"decision": "approve"})


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def nudge(home: Home, goal_id: int, unit: str) -> int:
    suggested = {"action": "restart", "args": {"unit": unit}}
    data = {"nudge": {"topic": "unit", "message": f"restart {unit}", "suggested": suggested}}
    return int(
        home.store.write(
            lambda c: qi.post(
                c, InboxKind.NOTICE, title="restart?", goal_id=goal_id, rule="nudge", data=data
            )
        )
    )


def open_approvals(home: Home) -> list[Any]:
    items = home.store.read(lambda c: qi.list_items(c, status="open"))
    return [i for i in items if i.kind == InboxKind.APPROVAL]


async def test_mcp_on_the_daemon_follows_agentd_reload(home: Home) -> None:
    port = closed_port()
    before = config_text(port, approvals=True, agents=["default", "old"], units=["a.service"])
    home.write_config(before, [RESTART, FINISH])
    gated = home.start_run(home.add_goal(title="restart a"))  # proposes restart: approval
    nudged = home.add_goal(title="restart c")
    nudge_id = nudge(home, nudged, "c.service")
    with daemon(home) as log:
        await wait_until(lambda: len(open_approvals(home)) == 1)
        (item,) = open_approvals(home)
        async with over_http(home, port) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            refused = await client.call_tool("accept_nudge", {"item_id": nudge_id})
            unknown = await client.call_tool("add_goal", {"title": "t", "why": "w", "agent": "new"})
        assert "approve" in listed
        assert refused.is_error and "not valid under the current config" in text_of(refused)
        assert unknown.is_error and "no agent 'new'" in text_of(unknown)

        after = config_text(
            port, approvals=False, agents=["default", "new"], units=["a.service", "c.service"]
        )
        home.paths.config.write_text(after)
        done = CliRunner().invoke(app, ["--home", str(home.root), "reload"])
        assert done.exit_code == 0, done.output
        ended = ('"config.reloaded"', '"config.reload_failed"')
        await wait_until(lambda: any(e in log.read_text() for e in ended))
        assert '"config.reloaded"' in log.read_text(), log.read_text()[-3000:]

        async with over_http(home, port, elicitation_callback=person_grants) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            granted = await client.call_tool("approve", {"item_id": item.item_id})
            accepted = await client.call_tool("accept_nudge", {"item_id": nudge_id})
            added = await client.call_tool("add_goal", {"title": "t", "why": "w", "agent": "new"})
            gone = await client.call_tool("add_goal", {"title": "t", "why": "w", "agent": "old"})

    assert "approve" not in names
    assert granted.is_error and "approving over MCP is off" in text_of(granted)
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).status == InboxStatus.OPEN
    assert home.run(gated).status == "waiting"  # the gated restart did not run
    assert not accepted.is_error, text_of(accepted)
    assert accepted.structured_content is not None
    assert accepted.structured_content["data"]["run_id"] is not None
    assert not added.is_error, text_of(added)
    assert added.structured_content is not None
    assert added.structured_content["agent"] == "new"
    assert gone.is_error and "no agent 'old'" in text_of(gone)
