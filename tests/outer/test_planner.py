"""One answer to "when is the next check-in?" (issue 20, item 4): for a goal with a cron schedule,
an interval schedule, a cadence look and quiet hours, at a now where the three differ, `agentd
goal show` (text), `goal show --json`, `agentd status` (text and --json), the MCP goal context
and the web goal page all show the same instant and reason — an interval fire inside quiet hours
at their end, a cron fire with the goal's jitter, said where it is shown."""

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
from agentd.outer import planner, schedule
from agentd.outer.cadence import Cadence
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


@pytest.mark.backends
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
    status = json.loads(agentd(home, "status", "--json"))["next_checkins"]
    board = agentd(home, "status").partition("next check-ins:\n")[2].splitlines()
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
    (listed,) = status
    assert ts(listed["at"]) == ts(shown["next_at"]) and listed["why"] == why, status
    assert listed["by"] == by and listed["tz"] == "UTC"
    (row, reason) = board[1:3]  # under the table's header: the goal's row, then its reason
    assert row.split()[0] == str(goal_id), board
    assert render_outer.local(expected, "UTC", now) in row
    assert render_outer.relative(expected, now) in row
    assert reason.strip() == f"why: {why}", board
    # goal show's schedules table says when the winning schedule's check-in runs, as above
    table = text.partition("schedules:\n")[2].split("\n\n")[0]
    (sched,) = [r for r in table.splitlines()[1:] if r.split()[0] == by.split()[1]]
    assert render_outer.local(expected, "UTC", now) in sched, table
    if winner == "interval":  # run at the quiet hours' end: the fire it holds, and no jitter
        assert "; due Tue Dec 1 23:" in sched and ", held" in sched and "jitter" not in sched, table


# ── the planner alone (pure) ─────────────────────────────────────────────────────────────────

NIGHT = Cadence(every_s=86400.0, min_s=14400.0, max_s=1209600.0, quiet=(22 * 60, 8 * 60), tz="UTC")


def hourly(misfire: str, next_fire_at: float, last: float | None = None) -> planner.Fire:
    spec = schedule.parse_spec("interval", "3600", "UTC", misfire=misfire)
    return planner.Fire(1, spec, at("2026-12-01T00:00"), last, next_fire_at)


def test_planner_cadence_look_in_quiet_hours_waits_for_their_end() -> None:
    look = planner.Look(at("2026-12-01T23:00"), "every 1d (the goal's cadence)")
    found = planner.next_checkin(at("2026-12-01T21:00"), 1, NIGHT, look=look)
    assert found is not None and found.at == at("2026-12-02T08:00") and found.by == "cadence"
    assert found.why.endswith("; it waits for the quiet hours to end at Wed 08:00")


def test_planner_names_the_jitter_of_a_look_moved_to_the_end_of_quiet_hours() -> None:
    j = schedule.jitter(1, 600.0)
    look = planner.Look(at("2026-12-02T08:00") + j, "quiet hours until 08:00", jitter_s=600.0)
    found = planner.next_checkin(at("2026-12-01T21:00"), 1, NIGHT, look=look)
    assert found is not None and found.at == look.at
    assert f"(Wed 08:00 + this goal's {int(j // 60)} min jitter)" in found.why


def test_planner_a_fire_missed_while_down_follows_its_misfire_policy() -> None:
    now = at("2026-12-01T12:30")
    missed = at("2026-12-01T10:00")  # recorded as next while the daemon was down
    once = planner.next_checkin(now, 1, NIGHT, look=None, fires=[hourly("once", missed)])
    assert once is not None and once.at == now and "misfire = once" in once.why
    skip = planner.next_checkin(now, 1, NIGHT, look=None, fires=[hourly("skip", missed)])
    assert skip is not None and skip.at == at("2026-12-01T13:00")


def test_planner_a_waiting_checkin_comes_first_and_a_snooze_passes_fires_over() -> None:
    now = at("2026-12-01T23:30")
    waiting = [planner.Waiting(7, 1, at("2026-12-01T23:00"))]
    fires = [hourly("once", at("2026-12-02T00:00"))]
    found = planner.next_checkin(now, 1, NIGHT, look=None, fires=fires, waiting=waiting)
    assert found is not None and found.by == "check-in 7" and found.at == at("2026-12-02T08:00")
    snoozed = planner.next_checkin(
        now, 1, NIGHT, look=None, fires=fires, waiting=waiting,
        snoozed_until=at("2026-12-02T10:30"),
    )  # fmt: skip
    assert snoozed is not None and snoozed.at == at("2026-12-02T11:00")
    assert "after the snooze until Wed 10:30" in snoozed.why
