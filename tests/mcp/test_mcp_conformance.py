"""What an MCP client expects of agentd's server, on both protocol eras (the 2025 handshake and
2026-07-28): agentd's version in serverInfo, structured results also as text, resource-not-found
with the code of the client's protocol version, argument errors in one sentence, and tools that
follow the config in force."""

from __future__ import annotations

import json
import warnings
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

import agentd
from agentd import config
from agentd.mcp import protocol, server
from agentd.models import InboxStatus
from tests.mcp.test_mcp_server import APPROVALS_ON, CONFIG, approval, item_status, mcp_of

MODES = pytest.mark.parametrize(("mode", "not_found"), [("legacy", -32002), ("auto", -32602)])


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


@MODES
async def test_mcp_server_info_names_agentds_version(home: Any, mode: str, not_found: int) -> None:
    async with Client(mcp_of(home), mode=mode) as client:
        info = client.server_info
    assert info is not None and (info.name, info.version) == ("agentd", agentd.__version__)


@MODES
async def test_mcp_structured_result_is_also_its_json_text(
    home: Any, mode: str, not_found: int
) -> None:
    async with Client(mcp_of(home), mode=mode) as client:
        usage = await client.call_tool("usage", {"days": 7})  # a list: no item, no text before
        added = await client.call_tool("add_goal", {"title": "t", "why": "w"})
    for result in (usage, added):
        assert not result.is_error, result
        assert result.structured_content is not None
        assert json.loads(text_of(result)) == result.structured_content


@MODES
async def test_mcp_missing_resource_answers_not_found(home: Any, mode: str, not_found: int) -> None:
    codes: dict[str, int] = {}
    async with Client(mcp_of(home), mode=mode) as client:
        for uri in ("agentd://goals/42", "agentd://runs/7", "agentd://nothing-here"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            codes[uri] = caught.value.error.code
            assert caught.value.error.data == {"uri": uri}
    assert set(codes.values()) == {not_found}, codes


async def test_mcp_legacy_subscribe_to_a_missing_resource_answers_not_found(home: Any) -> None:
    async with Client(mcp_of(home), mode="legacy") as client:
        with warnings.catch_warnings(), pytest.raises(MCPError) as caught:
            warnings.simplefilter("ignore")  # resources/subscribe is the pre-2026 way, on purpose
            await client.subscribe_resource("agentd://goals/42")
    assert caught.value.error.code == protocol.LEGACY_RESOURCE_NOT_FOUND
    assert "no goal 42" in caught.value.error.message


@MODES
async def test_mcp_argument_errors_are_one_sentence_naming_the_argument(
    home: Any, mode: str, not_found: int
) -> None:
    async with Client(mcp_of(home), mode=mode) as client:
        wrong_type = await client.call_tool("start_run", {"goal_id": "abc"})
        missing = await client.call_tool("add_goal", {"why": "w"})
        two = await client.call_tool("add_goal", {"criteria": "x", "why": "w"})
    assert text_of(wrong_type) == (
        "start_run was not run: argument goal_id should be a valid integer (got a string)"
    )
    assert text_of(missing) == "add_goal was not run: argument title is missing"
    assert text_of(two) == (
        "add_goal was not run: argument title is missing; "
        "argument criteria should be a valid list (got a string)"
    )
    for result in (wrong_type, missing, two):
        assert result.is_error and "\n" not in text_of(result)
        assert "pydantic" not in text_of(result) and "abc" not in text_of(result)


async def test_mcp_tools_follow_the_config_in_force(home: Any) -> None:
    home.write_config(CONFIG, [])
    home.store  # noqa: B018  # creates and migrates the database
    in_force = [config.load(home.paths.config)]
    mcp = server.build(home.paths, lambda: in_force[0])
    async with Client(mcp) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("approve", {"item_id": 1})
        in_force[0] = home.write_config(APPROVALS_ON)  # what the daemon's reload does
        after = {t.name for t in (await client.list_tools()).tools}
    assert "approve" not in before and "approve" in after
    assert refused.is_error and "[mcp] approvals = false" in text_of(refused)


async def test_mcp_approvals_turned_off_while_the_person_decides_grant_nothing(home: Any) -> None:
    in_force = [home.write_config(APPROVALS_ON, [])]
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    mcp = server.build(home.paths, lambda: in_force[0])

    async def person(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
        in_force[0] = home.write_config(CONFIG)  # the operator turns it off, and reloads
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with Client(mcp, mode="legacy", elicitation_callback=person) as client:
        result = await client.call_tool("approve", {"item_id": item_id})
    assert result.is_error and "[mcp] approvals = false" in text_of(result)
    assert item_status(home, item_id) == InboxStatus.OPEN
