"""The web inbox counts from the home's now (issue 20, item 5): under a simulated clock (here
started years from the wall, as `serve --clock-speed 3600 --clock-start 2030-01-07` does) every
page's "5m ago" and "in 2h" is measured on the clock the rows were stamped with, never the wall
beside it. A real daemon in-process, its web inbox over HTTP."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from agentd.db import items as qi
from agentd.models import InboxKind
from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home
from tests.web.test_web import login, web

START = datetime(2030, 1, 7, 9, 0, tzinfo=UTC).timestamp()
# "in 3d", "1131d ago", "2d5h ago": how far a time is, as every page says it
FAR = re.compile(r"\bin (\d+)d|\b(\d+)d(?:\d+h)? ago\b")


async def test_every_web_page_counts_from_the_homes_simulated_now(home: Home, serve: Any) -> None:
    home.write_config(with_web(scripted_home(["finish"])), [FINISH])
    goal_id = home.add_goal(title="Keep checkout up")  # before the clock: moved onto it below
    await serve(clock_speed=3600.0, clock_start=START)
    run_id = home.start_run(goal_id)
    item_id = home.store.write(
        lambda c: qi.post(c, InboxKind.NOTICE, title="deploy 41 took long", goal_id=goal_id)
    )
    home.store.write(
        lambda c: c.execute(
            "UPDATE goals SET created_at = ?, updated_at = ? WHERE goal_id = ?",
            (START, START, goal_id),
        )
    )
    wall_year = str(datetime.now(UTC).year)
    async with web(home) as c:
        await login(c, home)
        for path in ("/", f"/items/{item_id}", "/goals", f"/goals/{goal_id}", f"/runs/{run_id}"):
            page = (await c.get(path)).text
            text = re.sub(r"<[^>]+>", " ", page)
            far = [m[0] for m in FAR.finditer(text) if int(m[1] or m[2]) >= 7]
            assert not far, f"{path} counts from another clock: {far}"
            assert wall_year not in re.sub(r"\s+", " ", text).replace("agentd " + wall_year, ""), (
                f"{path} prints the wall's year beside the simulated 2030"
            )
