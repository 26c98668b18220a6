"""One answer to "when is the next check-in?" (issue 20, item 4): for a goal with a cron schedule,
an interval schedule, a cadence look and quiet hours, at a now where the three differ, `agentd
goal show` (text), `goal show --json`, the MCP goal context and the web goal page all show the
same instant and reason — an interval fire inside quiet hours at their end, a cron fire with the
goal's jitter, said where it is shown."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from mcp import Client
from starlette.applications import Starlette
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import meta
from agentd.mcp import server
from agentd.outer import schedule
from agentd.views import outer as render_outer
from agentd.web import auth, routes
from tests.conftest import Home
from tests.mcp.test_mcp_server import body

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]

[agents.default.checkin]
quiet = "22:00-08:00"
tz = "UTC"
jitter_s = 600.0
"""


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


def freeze(home: Home, now: float) -> None:
    """The home's clock stands at `now` (a recorded scaled clock of speed 0)."""
    clock = json.dumps({"speed": 0.0, "wall0": 0.0, "sim0": now})
    home.store.write(lambda c: meta.set_meta(c, "clock", clock))


def agentd(home: Home, *args: str) -> str:
    result = CliRunner().invoke(app, ["--home", str(home.root), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


async def mcp_next(home: Home, goal_id: int) -> Any:
    mcp = server.build(home.paths, home.write_config(CONFIG, []), poll_interval_s=0.05)
    async with Client(mcp) as client:
        return body(await client.read_resource(f"agentd://goals/{goal_id}"))["next_checkin"]


async def web_page(home: Home, goal_id: int) -> str:
    """The goal page as the daemon's route renders it (the web's own routes, no login guard)."""
    cfg = home.write_config(CONFIG, [])
    web = Starlette(routes=routes.ROUTES)
    token = auth.Token(home.paths.api_token)
    web.state.site = routes.Site(home.paths.db, lambda: cfg, token, lambda: None)
    transport = httpx.ASGITransport(app=web)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        r = await c.get(f"/goals/{goal_id}")
    assert r.status_code == 200, r.text
    found = re.search(r'<section id="next">.*?<p class="line">(.*?)</p>', r.text, re.S)
    assert found, r.text
    return html.unescape(found[1].replace("<br>", "\n"))


@pytest.mark.parametrize(
    ("cron", "winner"),
    [
        ("0 9 * * *", "interval"),  # the interval's 23:0x fire waits out the quiet hours: 08:00
        ("0 21 * * *", "cron"),  # the cron's 21:00 fire comes first, at 21:00 + the jitter
    ],
)
async def test_next_checkin_is_one_answer_on_every_surface(
    home: Home, cron: str, winner: str
) -> None:
    home.write_config(CONFIG, [])
    goal_id = home.add_goal(title="Keep checkout up")
    freeze(home, at("2026-12-01T12:00"))
    agentd(home, "goal", "cadence", str(goal_id), "--every", "3d")  # the look: Fri Dec 4 12:00
    agentd(home, "goal", "schedule", str(goal_id), "--cron", cron)
    freeze(home, at("2026-12-01T17:00"))
    agentd(home, "goal", "schedule", str(goal_id), "--every", "6h")  # 23:00, 05:00, … + jitter
    now = at("2026-12-01T20:00")
    freeze(home, now)
    jitter = schedule.jitter(goal_id, 600.0)
    assert jitter >= 60  # this goal's offset is visible in minutes
    if winner == "interval":
        expected, by = at("2026-12-02T08:00"), "schedule 2"
        words = ["quiet hours", "Tue 23:", "Wed 08:00"]
    else:
        expected, by = at("2026-12-01T21:00") + jitter, "schedule 1"
        minutes = int(jitter // 60)
        words = [f": Tue 21:{minutes:02d} (Tue 21:00 + this goal's {minutes} min jitter)"]

    shown = json.loads(agentd(home, "goal", "show", str(goal_id), "--json"))["checkin"]
    text = agentd(home, "goal", "show", str(goal_id))
    context = await mcp_next(home, goal_id)
    page = await web_page(home, goal_id)

    why = shown["next_why"]
    assert ts(shown["next_at"]) == pytest.approx(expected, abs=1e-3), shown
    assert shown["next_by"] == by and why.startswith(f"{by} (")
    assert all(w in why for w in words), why
    assert ts(shown["look_at"]) == at("2026-12-04T12:00")  # the cadence's own look, later
    assert ts(context["at"]) == ts(shown["next_at"]) and context["why"] == why
    assert context["by"] == by
    line = f"{render_outer.local(expected, 'UTC', now)} ({render_outer.relative(expected, now)})"
    field = text.partition("next check-in:")[2].partition("\ncadence:")[0]
    assert "\n".join(x.strip() for x in field.splitlines()) == f"{line}\nwhy: {why}", text
    assert page.strip() == f"{line}\nwhy: {why}"
