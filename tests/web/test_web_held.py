"""The web inbox says what quiet hours hold back, in `agentd status`'s words, above the list: a
real daemon (in-process, its notification sender running) whose goal is inside quiet hours now
holds a notice's message, and the inbox over HTTP names it; with nothing held (nothing posted,
or no quiet hours: the message is tried, not held) there is no line."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from agentd.db import items as qi
from agentd.db import outbox
from agentd.models import InboxKind, InboxStatus
from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home, closed_port, wait_for
from tests.web.test_web import login, web

HELD = re.compile(r'<p class="meta" id="held">(.*?)</p>', re.DOTALL)


def quiet_now() -> str:
    """Quiet hours (UTC) from an hour ago to two hours from now: whatever the wall clock says."""
    now = datetime.now(UTC)
    return f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=2):%H:%M}"


def held_home(quiet: str) -> str:
    # A channel nobody listens on: a message held by quiet hours is never tried, one that is
    # not fails its first try and waits for the next.
    channel = f'[notify.ops]\ntype = "webhook"\nurl = "http://127.0.0.1:{closed_port()}/hook"\n\n'
    return with_web(
        scripted_home(
            ["finish"],
            tables=channel,
            agent_keys=f'checkin = {{ quiet = "{quiet}", tz = "UTC" }}',
            agent_tables='[agents.default.notify]\nchannels = ["ops"]\non = ["notice"]\n\n',
        )
    )


def held_count(home: Home) -> int:
    health = home.store.read(outbox.channel_health)
    return int(health.get("ops", {}).get("held", 0))


async def test_web_inbox_says_what_quiet_hours_hold_above_the_list(home: Home, serve: Any) -> None:
    home.write_config(held_home(quiet_now()), [FINISH])
    goal_id = home.add_goal(title="Keep checkout up")
    await serve()
    async with web(home) as c:
        await login(c, home)
        quiet = (await c.get("/")).text
        assert 'id="held"' not in quiet and "held by quiet hours" not in quiet  # nothing held

        title = "nightly backup took 41 min"
        item_id = home.store.write(
            lambda c: qi.post(c, InboxKind.NOTICE, title=title, goal_id=goal_id)
        )
        await wait_for(lambda: held_count(home) == 1)
        page = (await c.get("/")).text
        found = HELD.search(page)
        assert found is not None, page
        line = found[1]
        assert line.startswith("1 held by quiet hours until ") and " UTC" in line, line
        assert line.endswith(f"(notice {item_id})"), line
        # Above the list: before the notice it holds back.
        assert page.index('id="held"') < page.index(f'id="item-{item_id}"')

        # Dismissed, the notice's message will never be sent: nothing is held any more (the
        # sender cancels it at its next pass, which may be the quiet hours' end).
        home.store.write(lambda c: qi.resolve(c, item_id, InboxStatus.DISMISSED, answer="seen"))
        assert held_count(home) == 0
        assert 'id="held"' not in (await c.get("/")).text


async def test_web_inbox_has_no_held_line_when_quiet_hours_hold_nothing(
    home: Home, serve: Any
) -> None:
    """Outside quiet hours the notice's message is tried at once (and fails: nobody listens):
    pending, not held, so the inbox says nothing of quiet hours."""
    home.write_config(held_home("none"), [FINISH])
    goal_id = home.add_goal(title="Keep checkout up")
    await serve()
    item_id = home.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="n", goal_id=goal_id))
    tried = "SELECT count(*) FROM outbox WHERE item_id = ? AND attempts > 0"
    await wait_for(lambda: home.store.read(lambda c: c.execute(tried, (item_id,)).fetchone()[0]))
    assert held_count(home) == 0
    async with web(home) as c:
        await login(c, home)
        page = (await c.get("/")).text
    assert f'id="item-{item_id}"' in page
    assert 'id="held"' not in page and "held by quiet hours" not in page
