"""agentd as an MCP server, driven in-process by the SDK's own client against real homes: every
resource lists and reads, tools go through the CLI's paths, approvals are the person's alone,
and a change made elsewhere (the CLI, the daemon) reaches subscribers."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated
from typer.testing import CliRunner, Result

from agentd import config
from agentd.cli import app
from agentd.db import artifacts as qa
from agentd.db import checkins, memory
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.mcp import context as doc
from agentd.mcp import server, tools
from agentd.models import InboxKind, InboxStatus, Run, RunStatus, StepKind, action_digest
from tests.conftest import finished, wait_for, waiting

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart]
type = "command"
argv = ["true", "{unit}"]
params = { unit = { choices = ["a.service", "b.service"] } }

[agents.default]
actions = ["notify", "ask", "finish", "restart"]

[agents.default.policy]
rules = { restart = "approve" }
"""
APPROVALS_ON = CONFIG + "\n[mcp]\napprovals = true\n"
ASK_THEN_FINISH = [
    {"reason": "need it", "action": {"kind": "ask", "question": "which region?"}},
    {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}},
]


def agentd(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(root), *args])


def mcp_of(home: Any, text: str = CONFIG) -> Any:
    cfg = home.write_config(text, [])
    home.store  # noqa: B018  # creates and migrates the database
    return server.build(home.paths, cfg, poll_interval_s=0.05)


def body(result: types.ReadResourceResult) -> Any:
    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return json.loads(content.text)


def approval(home: Any, goal_id: int, run_id: int) -> int:
    args = {"unit": "a.service"}
    return int(
        home.store.write(
            lambda c: qi.post(
                c, InboxKind.APPROVAL, title="approve restart?", body="The run proposes it.",
                goal_id=goal_id, run_id=run_id, action="restart", args=args,
                digest=action_digest("restart", args), rule="policy: restart = approve",
            )
        )
    )  # fmt: skip


def item_status(home: Any, item_id: int) -> InboxStatus:
    return InboxStatus(home.store.read(lambda c: qi.get_item(c, item_id)).status)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# ── resources ────────────────────────────────────────────────────────────────────────────────


async def test_mcp_lists_and_reads_every_resource(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal(title="Find a backend job")
    run_id = home.start_run(goal_id)
    item_id = home.store.write(
        lambda c: qi.post(
            c, InboxKind.QUESTION, title="which city?", goal_id=goal_id, run_id=run_id
        )
    )
    home.store.write(lambda c: memory.remember(c, goal_id, "known", "lives in Lyon", "test", 1.0))
    build_id = home.store.write(
        lambda c: qa.create_build(c, goal_id=goal_id, agent="default", spec={"request": "a CV"})
    )
    async with Client(mcp) as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = await client.list_resource_templates()
        shapes = {t.uri_template for t in templates.resource_templates}
        goals = body(await client.read_resource("agentd://goals"))
        context = body(await client.read_resource(f"agentd://goals/{goal_id}"))
        runs = body(await client.read_resource(f"agentd://goals/{goal_id}/runs"))
        run = body(await client.read_resource(f"agentd://runs/{run_id}"))
        inbox = body(await client.read_resource("agentd://inbox"))
        artifact = body(await client.read_resource(f"agentd://artifacts/{build_id}"))
        schema = body(await client.read_resource("agentd://schema/goal-context"))

    assert listed == {"agentd://goals", "agentd://inbox", "agentd://schema/goal-context"}
    assert shapes == {
        "agentd://goals/{goal_id}", "agentd://goals/{goal_id}/runs",
        "agentd://runs/{run_id}", "agentd://artifacts/{artifact_id}",
    }  # fmt: skip
    assert [g["goal_id"] for g in goals] == [goal_id]
    assert goals[0]["active_run"]["run_id"] == run_id
    parsed = doc.GoalContext.model_validate(context)  # the document matches its schema
    assert parsed.title == "Find a backend job" and context["schema"] == doc.SCHEMA_ID
    assert [m.text for m in parsed.memory] == ["lives in Lyon"]
    assert [i.item_id for i in parsed.open_inbox] == [item_id]
    assert [a.artifact for a in parsed.artifacts] == [build_id]
    assert {r["run_id"] for r in runs} == {run_id, build_id}
    assert run["status"] == "running" and run["task_status"] == "working"
    assert run["steps"][0]["kind"] == StepKind.START
    assert [i["item_id"] for i in inbox] == [item_id]
    assert artifact["artifact"] == build_id and artifact["versions"] == []
    assert schema == json.loads(doc.dump(doc.GoalContext.model_json_schema(by_alias=True)))


async def test_mcp_unknown_resource_is_an_error_naming_it(home: Any) -> None:
    mcp = mcp_of(home)
    async with Client(mcp) as client:
        with pytest.raises(Exception, match="no goal 42"):
            await client.read_resource("agentd://goals/42")


@pytest.mark.parametrize(
    ("status", "wait", "expected"),
    [
        (RunStatus.RUNNING, None, "working"),
        (RunStatus.WAITING, {"kind": "inbox", "item_id": 1}, "input_required"),
        (RunStatus.WAITING, {"kind": "timer"}, "working"),
        (RunStatus.SUCCEEDED, None, "completed"),
        (RunStatus.FAILED, None, "failed"),
        (RunStatus.CANCELLED, None, "cancelled"),
    ],
)
def test_task_status_maps_runs_onto_mcp_tasks(
    status: RunStatus, wait: dict[str, Any] | None, expected: str
) -> None:
    now = datetime.now(UTC)
    run = Run(
        run_id=1, goal_id=1, agent="a", status=RunStatus.RUNNING, trigger="t", step_count=0,
        wait=None, next_wake_at=None, summary=None, created_at=now, updated_at=now,
    )  # fmt: skip
    assert doc.task_status(replace(run, status=status, wait=wait)) == expected


# ── tools ────────────────────────────────────────────────────────────────────────────────────


async def test_mcp_add_goal_appears_in_goal_list(home: Any) -> None:
    mcp = mcp_of(home)
    async with Client(mcp) as client:
        result = await client.call_tool(
            "add_goal",
            {"title": "Get a job", "why": "rent", "criteria": ["an offer"], "deadline": "30d"},
        )
    assert not result.is_error, result
    listed = agentd(home.root, "goal", "list", "--json")
    assert listed.exit_code == 0, listed.output
    (goal,) = json.loads(listed.stdout)
    assert (goal["title"], goal["criteria"]) == ("Get a job", ["an offer"])
    assert result.structured_content is not None
    assert result.structured_content["goal_id"] == goal["goal_id"]


async def test_mcp_tool_errors_carry_the_cli_message(home: Any) -> None:
    mcp = mcp_of(home)
    async with Client(mcp) as client:
        blank = await client.call_tool("add_goal", {"title": "  ", "why": "rent"})
        past = await client.call_tool(
            "add_goal", {"title": "t", "why": "w", "deadline": "2001-01-01"}
        )
        missing = await client.call_tool("start_run", {"goal_id": 9})
    assert "the title is empty" in error_text(blank)
    assert "is in the past" in error_text(past)
    assert "no goal 9" in error_text(missing)
    assert home.store.read(q.list_goals) == []


async def test_mcp_add_context_joins_the_goals_memory(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()
    async with Client(mcp) as client:
        result = await client.call_tool(
            "add_context", {"goal_id": goal_id, "text": "I moved to Berlin"}
        )
        context = body(await client.read_resource(f"agentd://goals/{goal_id}"))
    assert not result.is_error, result
    assert {"kind": "known", "text": "I moved to Berlin", "source": "mcp"}.items() <= (
        context["memory"][-1].items()
    )
    shown = agentd(home.root, "goal", "show", str(goal_id), "--json")
    assert "I moved to Berlin" in shown.stdout


async def test_mcp_accept_and_dismiss_nudges_as_the_cli_does(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()

    def nudge(topic: str) -> int:
        data = {"nudge": {"topic": topic, "message": f"look at {topic}"}}
        return int(
            home.store.write(
                lambda c: qi.post(
                    c, InboxKind.NOTICE, title=topic, goal_id=goal_id, rule="nudge", data=data
                )
            )
        )

    taken, dropped = nudge("Acme role"), nudge("Initech role")
    async with Client(mcp) as client:
        accepted = await client.call_tool("accept_nudge", {"item_id": taken})
        dismissed = await client.call_tool(
            "dismiss_nudge", {"item_id": dropped, "reason": "already applied"}
        )
        again = await client.call_tool("dismiss_nudge", {"item_id": dropped})
        context = body(await client.read_resource(f"agentd://goals/{goal_id}"))
    assert not accepted.is_error and not dismissed.is_error, (accepted, dismissed)
    assert again.structured_content is not None  # dismissing twice: a note, as the CLI says
    assert again.structured_content["changed"] is False
    assert "nothing changed" in again.structured_content["note"]
    assert item_status(home, taken) == InboxStatus.ANSWERED
    assert item_status(home, dropped) == InboxStatus.DISMISSED
    kinds = [(m["kind"], m["text"]) for m in context["memory"]]
    assert kinds[0][0] == "accepted" and "Acme role" in kinds[0][1]
    assert kinds[1][0] == "dismissed" and "already applied" in kinds[1][1]
    assert context["next_checkin"]["backoff"] == 1  # a dismissed nudge backs the cadence off


async def test_mcp_check_in_now_records_a_due_check_in(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()
    async with Client(mcp) as client:
        first = await client.call_tool("check_in_now", {"goal_id": goal_id})
        usage = await client.call_tool("usage", {"days": 7})
    assert not first.is_error, first
    listed = json.loads(agentd(home.root, "checkins", "--json").stdout)
    assert [(c["goal_id"], c["status"]) for c in listed] == [(goal_id, "due")]
    assert not usage.is_error, usage


async def test_mcp_check_in_now_is_run_by_the_daemon(home: Any, serve: Any) -> None:
    nothing = {"reason": "all quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}
    # Quiet hours off: a check-in due inside them waits for their end, whoever asked for it.
    cfg = home.write_config(CONFIG + '\n[agents.default.checkin]\nquiet = "none"\n', [nothing] * 3)
    goal_id = home.add_goal()
    mcp = server.build(home.paths, cfg, poll_interval_s=0.05)
    await serve()
    async with Client(mcp) as client:
        result = await client.call_tool("check_in_now", {"goal_id": goal_id})
    assert not result.is_error, result
    assert result.structured_content is not None
    checkin_id = result.structured_content["checkin_id"]

    def looked() -> bool:  # read from the database: the daemon in this process logs to stdout
        row = home.store.read(lambda c: checkins.get(c, checkin_id))
        return row.status in ("skipped", "done")

    await wait_for(looked)


async def test_mcp_answer_wakes_the_waiting_run(home: Any, serve: Any) -> None:
    cfg = home.write_config(CONFIG, ASK_THEN_FINISH)
    goal_id = home.add_goal()
    mcp = server.build(home.paths, cfg, poll_interval_s=0.05)
    await serve()
    async with Client(mcp) as client:
        started = await client.call_tool("start_run", {"goal_id": goal_id})
        assert not started.is_error, started
        assert started.structured_content is not None
        run_id = started.structured_content["run_id"]
        await wait_for(waiting(home, run_id))
        run = body(await client.read_resource(f"agentd://runs/{run_id}"))
        (question,) = body(await client.read_resource("agentd://inbox"))
        answered = await client.call_tool(
            "answer_question", {"item_id": question["item_id"], "text": "eu-west"}
        )
        assert not answered.is_error, answered
        await wait_for(finished(home, run_id))
        done = body(await client.read_resource(f"agentd://runs/{run_id}"))
    assert run["task_status"] == "input_required" and question["title"] == "which region?"
    assert done["status"] == "succeeded" and done["task_status"] == "completed"
    wakes = [s for s in done["steps"] if s["kind"] == StepKind.WAKE]
    assert "eu-west" in json.dumps(wakes)


# ── approvals are the person's ───────────────────────────────────────────────────────────────


def decide(action: str, content: dict[str, Any] | None = None) -> Any:
    seen: list[str] = []

    async def callback(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action=action, content=content)

    callback.seen = seen  # type: ignore[attr-defined]
    return callback


async def test_approvals_off_no_tool_can_grant_one(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    async with Client(mcp, elicitation_callback=decide("accept", {"decision": "approve"})) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        unknown = await c.call_tool("approve", {"item_id": item_id})
        tries = [
            await c.call_tool("answer_question", {"item_id": item_id, "text": "approved"}),
            await c.call_tool("accept_nudge", {"item_id": item_id}),
            await c.call_tool("dismiss_nudge", {"item_id": item_id}),
        ]
    assert "approve" not in names and unknown.is_error
    assert all(t.is_error for t in tries)
    assert "is an approval, not a question" in error_text(tries[0])
    assert item_status(home, item_id) == InboxStatus.OPEN


async def test_approve_refused_without_elicitation(home: Any) -> None:
    mcp = mcp_of(home, APPROVALS_ON)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    async with Client(mcp) as client:
        result = await client.call_tool(
            "approve",
            {"item_id": item_id, "decision": {"action": "accept", "data": {"decision": "approve"}}},
        )
    assert "does not support MCP elicitation" in error_text(result)
    assert item_status(home, item_id) == InboxStatus.OPEN


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_approve_declined_by_the_person_grants_nothing(home: Any, action: str) -> None:
    mcp = mcp_of(home, APPROVALS_ON)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    person = decide(action)
    forged = {"action": "accept", "data": {"decision": "approve"}}  # the caller's word: ignored
    async with Client(mcp, elicitation_callback=person) as client:
        result = await client.call_tool("approve", {"item_id": item_id, "decision": forged})
    assert "stays open" in error_text(result)
    assert "restart" in person.seen[0] and "a.service" in person.seen[0]
    assert item_status(home, item_id) == InboxStatus.OPEN


async def test_approve_accepted_by_the_person_is_recorded_as_theirs(home: Any) -> None:
    mcp = mcp_of(home, APPROVALS_ON)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    person = decide("accept", {"decision": "approve", "reason": "planned window"})
    async with Client(mcp, elicitation_callback=person) as client:
        result = await client.call_tool("approve", {"item_id": item_id})
    assert not result.is_error, result
    item = home.store.read(lambda c: qi.get_item(c, item_id))
    assert item.status == InboxStatus.APPROVED
    assert item.answer == f"planned window ({tools.VIA_ELICITATION})"


async def test_approve_deny_by_the_person_denies(home: Any) -> None:
    mcp = mcp_of(home, APPROVALS_ON)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    async with Client(mcp, elicitation_callback=decide("accept", {"decision": "deny"})) as c:
        result = await c.call_tool("approve", {"item_id": item_id})
    assert not result.is_error, result
    item = home.store.read(lambda c: qi.get_item(c, item_id))
    assert (item.status, item.answer) == (InboxStatus.DENIED, tools.VIA_ELICITATION)


async def test_approve_on_the_legacy_protocol_asks_the_person_too(home: Any) -> None:
    mcp = mcp_of(home, APPROVALS_ON)
    goal_id = home.add_goal()
    item_id = approval(home, goal_id, home.start_run(goal_id))
    person = decide("decline")
    async with Client(mcp, mode="legacy", elicitation_callback=person) as client:
        declined = await client.call_tool("approve", {"item_id": item_id})
    assert declined.is_error and len(person.seen) == 1
    assert item_status(home, item_id) == InboxStatus.OPEN


# ── change notifications ─────────────────────────────────────────────────────────────────────


async def test_goal_change_by_the_cli_notifies_listeners(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()
    uri = f"agentd://goals/{goal_id}"
    async with Client(mcp) as client:
        await client.read_resource(uri)
        async with client.listen(resource_subscriptions=[uri], resources_list_changed=True) as sub:
            await anyio.sleep(0.2)  # the watcher has its baseline
            assert agentd(home.root, "goal", "pause", str(goal_id)).exit_code == 0
            assert agentd(home.root, "goal", "add", "another", "--why", "w").exit_code == 0
            events: list[Any] = []
            with anyio.fail_after(5):
                async for event in sub:
                    events.append(event)
                    if ResourcesListChanged() in events and ResourceUpdated(uri=uri) in events:
                        break
            context = body(await client.read_resource(uri, cache_mode="bypass"))
    assert context["status"] == "paused"


async def test_goal_change_notifies_legacy_subscribers(home: Any) -> None:
    mcp = mcp_of(home)
    goal_id = home.add_goal()
    uri = f"agentd://goals/{goal_id}"
    got: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            got.append(message)

    async with Client(mcp, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is the pre-2026 way, on purpose
            await client.subscribe_resource(uri)
        await anyio.sleep(0.2)
        assert agentd(home.root, "goal", "add", "another", "--why", "w").exit_code == 0
        assert agentd(home.root, "goal", "pause", str(goal_id)).exit_code == 0
        with anyio.fail_after(5):
            while not any(isinstance(m, types.ResourceUpdatedNotification) for m in got):
                await anyio.sleep(0.02)
    updated = [m for m in got if isinstance(m, types.ResourceUpdatedNotification)]
    assert str(updated[0].params.uri) == uri
    assert any(isinstance(m, types.ResourceListChangedNotification) for m in got)


def test_config_mcp_approvals_default_off(home: Any) -> None:
    cfg = home.write_config(CONFIG)
    assert cfg.mcp.approvals is False
    assert config.load(home.paths.config).mcp == cfg.mcp
