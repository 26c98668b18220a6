"""A goal whose check-ins fail is named where the operator looks (issue 20, item 3): `agentd
status` and `agentd goal show` (text and --json) say how many failed in a row, since when, the
last error in one line (URLs by host only) and what to do — from the first failure, before the
notice after three; a check-in that succeeds again clears it. A real SQLite home, the scripted
check-in model replying nonsense, the real CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from typer.testing import CliRunner

from agentd.cli import app
from tests.outer.test_checkin import NOTHING, Env, Make, goal, world_moves
from tests.outer.test_checkin import make as make  # the fixture, by its name

# The model's reply names a verdict kind with a newline and a webhook URL carrying a token.
BAD = {"verdict": {"kind": "see https://hooks.example.com/T01/B02/s3cr3t-t0ken?sig=abc\nnext"}}


def agentd(env: Env, *args: str) -> str:
    result = CliRunner().invoke(app, ["--home", str(env.home.root), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def fail_three(env: Env, goal_id: int) -> list[Any]:
    rows = []
    for n in range(1, 4):
        world_moves(env, n)
        rows.append(await env.check(goal_id))
        assert rows[-1].status == "failed", rows[-1]
    return rows


async def test_status_names_a_goal_whose_checkins_fail(make: Make) -> None:
    env = await make([BAD])
    goal_id = goal(env, title="keep the blog fresh")
    rows = await fail_three(env, goal_id)
    data = json.loads(agentd(env, "status", "--json"))
    text = agentd(env, "status")

    (failing,) = data["failing_checkins"]
    assert data["failing_goals"] == 1
    assert failing["goal_id"] == goal_id and failing["in_a_row"] == 3
    assert failing["title"] == "keep the blog fresh"
    assert ts(failing["since"]) == rows[0].completed_at  # the streak's first failure
    assert ts(failing["last_at"]) == rows[-1].completed_at
    assert failing["last_checkin_id"] == rows[-1].checkin_id
    error = failing["last_error"]
    assert "unknown verdict kind" in error and "\n" not in error
    assert "https://hooks.example.com/…" in error and "s3cr3t" not in error and "sig=" not in error
    assert "agentd doctor --ping" in failing["what_to_do"]
    section = text.partition("failing check-ins:\n")[2].partition("\n\nnext check-ins:")[0]
    header, row, *rest = section.splitlines()
    assert header.split()[:4] == ["GOAL", "IN", "A", "ROW"], section
    assert row.split()[:2] == [str(goal_id), "3"] and "unknown verdict kind" in row, section
    assert "s3cr3t" not in text
    assert "agentd doctor --ping" in rest[-1] and "agentd checkins --goal ID" in rest[-1]


async def test_goal_show_says_its_checkins_fail_and_what_to_do(make: Make) -> None:
    env = await make([BAD])
    goal_id = goal(env)
    rows = await fail_three(env, goal_id)
    shown = json.loads(agentd(env, "goal", "show", str(goal_id), "--json"))["checkin"]["failing"]
    text = agentd(env, "goal", "show", str(goal_id))

    assert shown["in_a_row"] == 3 and ts(shown["since"]) == rows[0].completed_at
    assert shown["last_checkin_id"] == rows[-1].checkin_id
    assert "unknown verdict kind" in shown["last_error"] and "s3cr3t" not in shown["last_error"]
    field = text.partition("failing:")[2].partition("next check-in:")[0]
    lines = [x.strip() for x in field.splitlines()]
    assert lines[0].startswith("3 check-ins in a row since "), field
    assert lines[1].startswith(f"last error (check-in {rows[-1].checkin_id}): "), field
    assert "unknown verdict kind" in lines[1] and "s3cr3t" not in text
    assert lines[2].startswith("what to do: ") and "agentd doctor --ping" in lines[2], field
    # a refused reply is the check-in model's doing, which `doctor --ping` (a tiny reply) misses
    assert "[agents.default.checkin] model" in " ".join(lines[2:]), field


async def test_a_checkin_that_succeeds_again_clears_the_failing_streak(make: Make) -> None:
    env = await make([BAD, BAD, NOTHING])
    goal_id = goal(env)
    world_moves(env, 1)
    assert (await env.check(goal_id)).status == "failed"
    failing = json.loads(agentd(env, "status", "--json"))["failing_checkins"]
    assert [x["in_a_row"] for x in failing] == [1]  # visible from the first failure
    world_moves(env, 2)
    assert (await env.check(goal_id)).status == "done"
    data = json.loads(agentd(env, "status", "--json"))
    assert data["failing_checkins"] == [] and data["failing_goals"] == 0
    shown = json.loads(agentd(env, "goal", "show", str(goal_id), "--json"))["checkin"]
    assert shown["failing"] is None
    assert "failing" not in agentd(env, "goal", "show", str(goal_id)).partition("next check-in")[0]


async def test_the_checkins_table_and_the_notice_show_a_failing_url_by_host(make: Make) -> None:
    env = await make([BAD])
    goal_id = goal(env)
    await fail_three(env, goal_id)
    table = agentd(env, "checkins", "--goal", str(goal_id))
    inbox = json.loads(agentd(env, "inbox", "list", "--all", "--json"))

    (notice,) = [x for x in inbox if "failed 3 times in a row" in x["title"]]
    body = json.loads(agentd(env, "inbox", "show", str(notice["item_id"]), "--json"))["body"]
    assert "https://hooks.example.com/…" in body and "s3cr3t" not in body, body
    shown = agentd(env, "inbox", "show", str(notice["item_id"]))
    assert "written by agentd (an error it quotes may hold" in shown, shown  # not "by the model"
    assert "written by the model" not in shown
    assert "unknown verdict kind" in table and "s3cr3t" not in table, table


async def test_the_web_goal_page_says_its_checkins_fail(make: Make) -> None:
    from agentd.web import data, goal_page

    env = await make([BAD])
    goal_id = goal(env)
    rows = await fail_three(env, goal_id)
    goal_, runs, outlook, open_items = data.goal_outlook(env.home.store, env.deps.config, goal_id)
    now = datetime.fromtimestamp(outlook["now"], UTC)
    page = goal_page.goal_page(goal_, runs, outlook, open_items, now)

    failing = page.partition('id="failing">')[2].partition("</p>")[0]
    assert failing.startswith("Failing: 3 check-ins in a row since "), page
    assert f"last error (check-in {rows[-1].checkin_id}): " in failing
    assert "unknown verdict kind" in failing and "s3cr3t" not in page
    assert page.index('<section id="next">') < page.index('id="failing"')  # under Next check-in
