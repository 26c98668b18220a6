"""`agentd mcp` as a real subprocess, driven by the SDK's stdio client: it initializes, lists and
reads resources, runs a tool — and writes nothing but protocol to stdout."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from agentd.db import queries as q

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]
"""

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_agentd_mcp_over_stdio_speaks_only_protocol(
    home: Any, tmp_path: Path, mode: str
) -> None:
    home.write_config(CONFIG, [])
    goal_id = home.add_goal(title="Find a backend job")
    stdout = tmp_path / "stdout.jsonl"
    # Everything the server writes to stdout passes through tee to a file, to be checked after.
    command = (
        f"{shlex.quote(sys.executable)} -m agentd mcp --home {shlex.quote(str(home.root))}"
        f" | tee {shlex.quote(str(stdout))}"
    )
    params = StdioServerParameters(command="sh", args=["-c", command], cwd=str(Path.cwd()))
    async with Client(params, mode=mode) as client:
        listed = await client.list_resources()
        read = await client.read_resource(f"agentd://goals/{goal_id}")
        added = await client.call_tool("add_goal", {"title": "Learn Go", "why": "the new job"})
        refused = await client.call_tool("start_run", {"goal_id": 99})

    assert "agentd://goals" in {str(r.uri) for r in listed.resources}
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert json.loads(content.text)["title"] == "Find a backend job"
    assert not added.is_error and refused.is_error
    assert [g.title for g in home.store.read(q.list_goals)] == ["Find a backend job", "Learn Go"]
    lines = stdout.read_text().splitlines()
    assert lines, "the server wrote nothing"
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line


async def test_agentd_mcp_follows_the_config_file(home: Any, tmp_path: Path) -> None:
    """`agentd mcp` lives as long as its client: an edit of config.toml applies at the next
    request (approve goes with `[mcp] approvals = false`), and a file that does not validate
    leaves the config loaded before in force."""
    home.write_config(CONFIG + "\n[mcp]\napprovals = true\n", [])
    home.store  # noqa: B018  # creates and migrates the database
    stderr = tmp_path / "stderr.log"
    command = (
        f"{shlex.quote(sys.executable)} -m agentd mcp --home {shlex.quote(str(home.root))}"
        f" 2>{shlex.quote(str(stderr))}"
    )
    params = StdioServerParameters(command="sh", args=["-c", command], cwd=str(Path.cwd()))
    async with Client(params, mode="legacy") as client:
        before = {t.name for t in (await client.list_tools()).tools}
        home.paths.config.write_text(CONFIG.replace("[agents.default]", "[agents.other]"))
        after = {t.name for t in (await client.list_tools()).tools}
        home.paths.config.write_text("[agents.broken\n")
        broken = {t.name for t in (await client.list_tools()).tools}
        added = await client.call_tool("add_goal", {"title": "t", "why": "w", "agent": "other"})
    assert "approve" in before and "approve" not in after and broken == after
    assert not added.is_error, added
    assert [g.agent for g in home.store.read(q.list_goals)] == ["other"]
    assert "mcp.config_invalid" in stderr.read_text()
