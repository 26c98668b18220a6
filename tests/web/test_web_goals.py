"""A goal's controls and the inbox's bulk dismissal and filters over HTTP (httpx against the
daemon's app on its unix socket): pause and resume, check in now, snooze and its end, a schedule
added and removed, bad input worded on the page; dismissing "all shown" dismisses only what the
page showed; a filter the form never offers is said, not obeyed; a 404 speaks to a person."""

from __future__ import annotations

import re
from typing import Any

import httpx

from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import GoalStatus, InboxKind, InboxStatus
from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home
from tests.web.test_web import SAME, login, web

CONFIG = scripted_home(["finish"])


async def posted(c: httpx.AsyncClient, path: str, form: dict[str, str]) -> str:
    """Post a form as the page does; the text of the page it is sent back to."""
    r = await c.post(path, data=form, headers=SAME)
    assert r.status_code == 303, r.text
    return (await c.get(r.headers["location"])).text


def flash_of(page: str) -> str:
    found = re.search(r'<p class="(?:flash|error)">(.*?)</p>', page)
    return found[1] if found else ""


async def test_web_goal_controls_use_the_goal_commands(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    goal_id = home.add_goal(title="Keep checkout up")
    await serve()
    at = f"/goals/{goal_id}"
    goal = lambda: home.store.read(lambda c: q.get_goal(c, goal_id))  # noqa: E731
    async with web(home) as c:
        await login(c, home)
        assert "Paused goal" in flash_of(await posted(c, f"{at}/pause", {}))
        assert goal().status == GoalStatus.PAUSED
        again = flash_of(await posted(c, f"{at}/pause", {}))
        assert again.startswith("Nothing changed") and "already paused" in again
        refused = flash_of(await posted(c, f"{at}/checkin", {}))
        assert refused.startswith("Not done") and "paused" in refused
        assert "Resumed goal" in flash_of(await posted(c, f"{at}/resume", {}))
        assert "checks in now" in flash_of(await posted(c, f"{at}/checkin", {}))
        assert home.store.read(lambda c: qc.list_checkins(c, goal_id))
        page = await posted(c, f"{at}/snooze", {"seconds": "3600"})
        assert "Snoozed goal" in flash_of(page) and 'id="unsnooze-form"' in page
        page = await posted(c, f"{at}/snooze", {"seconds": "0"})
        assert "snooze is over" in flash_of(page) and 'id="unsnooze-form"' not in page
        bad = flash_of(await posted(c, f"{at}/schedule", {"spec": "every tuesday"}))
        assert bad.startswith("Not done: what was entered is not valid.")
        page = await posted(c, f"{at}/schedule", {"spec": "30 7 * * sat", "tz": "Europe/Berlin"})
        assert "Added schedule 1" in flash_of(page) and "30 7 * * sat" in page
        page = await posted(c, f"{at}/schedule", {"spec": "1d"})
        assert "Added schedule 2" in flash_of(page) and "every 1d" in page
        page = await posted(c, f"{at}/unschedule", {"schedule_id": "1"})
        assert "Removed schedule 1" in flash_of(page) and "30 7 * * sat" not in page
        unknown = flash_of(await posted(c, f"{at}/explode", {}))
        assert unknown.startswith("Not done") and "unknown action" in unknown
        evil = {"Origin": "http://attacker.test", "Sec-Fetch-Site": "cross-site"}
        for path in (f"{at}/pause", "/dismiss"):  # the new forms sit behind the same guard
            assert (await c.post(path, data={}, headers=evil)).status_code == 403, path
    async with web(home) as keyless:  # a form sent without the session's key: the login
        r = await keyless.post(f"{at}/pause", data={}, headers=SAME)
        assert r.status_code == 303 and r.headers["location"] == "/login"
    assert goal().status == GoalStatus.ACTIVE


def notice(home: Home, title: str, goal_id: int | None = None) -> int:
    return home.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title=title, goal_id=goal_id))


async def test_web_dismiss_all_shown_leaves_what_came_later(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    goal_id = home.add_goal(title="Keep checkout up")
    await serve()
    shown = [notice(home, "one", goal_id), notice(home, "two")]
    async with web(home) as c:
        await login(c, home)
        page = (await c.get("/")).text
        ids = re.search(r'name="shown" value="([0-9,]+)"', page)
        assert ids and sorted(map(int, ids[1].split(","))) == sorted(shown)
        later = notice(home, "arrived after the page was shown")
        done = await posted(c, "/dismiss", {"scope": "all", "shown": ids[1]})
        assert "Dismissed 2 notice(s)." in flash_of(done)
        none = await posted(c, "/dismiss", {"scope": "selected", "shown": ids[1]})
        assert flash_of(none).startswith("Nothing dismissed")
        twice = await posted(c, "/dismiss", {"scope": "selected", "item": str(shown[0])})
        assert "1 no longer open" in flash_of(twice)
    status = {i.item_id: i.status for i in home.store.read(lambda c: qi.list_items(c, status=None))}
    assert [status[i] for i in shown] == [InboxStatus.DISMISSED] * 2
    assert status[later] == InboxStatus.OPEN


async def test_web_inbox_filters(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    mine, other = home.add_goal(title="mine"), home.add_goal(title="other")
    await serve()
    notice(home, "for mine", mine)
    notice(home, "for other", other)
    async with web(home) as c:
        await login(c, home)
        page = (await c.get("/", params={"goal": str(mine)})).text
        assert "for mine" in page and "for other" not in page
        assert (await c.get("/", params={"kind": "approval"})).text.count('id="item-') == 0
        assert 'id="empty"' in (await c.get("/", params={"kind": "approval"})).text
        odd = (await c.get("/", params={"kind": "<b>"})).text
        assert "Not shown as asked: no kind &#x27;&lt;b&gt;&#x27;" in odd and "for other" in odd


async def test_web_not_found_speaks_to_a_person(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    await serve()
    async with web(home) as c:
        await login(c, home)
        for path, said in (("/goals/77", "There is no goal 77"), ("/runs/5", "There is no run 5"),
                           ("/a/<b>", "There is no page at /a/&lt;b&gt;")):  # fmt: skip
            r = await c.get(path)
            assert r.status_code == 404 and said in r.text and 'href="/"' in r.text, path
            assert "agentd goal list" not in r.text and "agentd runs" not in r.text
        api = await c.get("/api/goals/77", headers={"Authorization": "Bearer x"})
        assert api.status_code == 401  # the API's own answer, never the page
