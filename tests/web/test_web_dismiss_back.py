"""The inbox's bulk dismissal returns to the page it was made on — its filters and its place in
the list — not to the first page (issue 35's web pages). The way back is the form's `back` field,
rebuilt from the filters it parses: a value naming any other address (another path, another
site, a header) brings the browser to the inbox's first page, never there."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentd.web.inbox_page import PAGE
from tests.conftest import Home
from tests.web.test_web import SAME
from tests.web.test_web_inbox_pager import inbox_home, signed_in


async def test_a_bulk_dismissal_returns_to_its_page(home: Home, serve: Any) -> None:
    ids = inbox_home(home, 2 * PAGE + 10)
    async with signed_in(home, serve) as c:
        here = f"/?kind=notice&limit=20&after={ids[19]}"
        page = (await c.get(here)).text
        back = re.search(r'name="back" value="([^"]*)"', page)
        shown = re.search(r'name="shown" value="([\d,]+)"', page)
        assert back is not None and shown is not None
        assert back[1].replace("&amp;", "&") == here
        r = await c.post("/dismiss", headers=SAME,
                         data={"scope": "all", "shown": shown[1], "back": here})  # fmt: skip
        assert r.status_code == 303
        assert r.headers["location"].startswith(here + "&note=")
        page = (await c.get(r.headers["location"])).text
        assert re.search(r"<p class=\"flash\">[^<]*20", page), page[:2000]  # the flash, here
        assert sorted(int(i) for i in re.findall(r'id="item-(\d+)"', page)) == ids[40:60]
        nothing = await c.post("/dismiss", headers=SAME, data={"scope": "selected", "back": here})
        assert nothing.headers["location"].startswith(here + "&note=")


@pytest.mark.parametrize(
    "back", ["//evil.example/", "https://evil.example/?a=1", "/goals", "/?after=x",
             "/\r\nSet-Cookie: a=1", "/?kind=notice&x=%22%3E%3Cscript%3E", "", "javascript:x"],
)  # fmt: skip
async def test_a_way_back_elsewhere_is_the_first_page(home: Home, serve: Any, back: str) -> None:
    ids = inbox_home(home, 2)
    async with signed_in(home, serve) as c:
        r = await c.post("/dismiss", headers=SAME,
                         data={"scope": "selected", "item": str(ids[0]), "back": back})  # fmt: skip
        assert r.status_code == 303
        location = r.headers["location"]
        assert location.startswith(("/?note=", "/?kind=notice&note=")), location
        assert "<" not in location and "evil" not in location and "\n" not in location


async def test_a_ticked_box_that_is_not_a_number_is_not_a_server_error(
    home: Home, serve: Any
) -> None:
    inbox_home(home, 1)
    async with signed_in(home, serve) as c:
        for picked in (
            {"scope": "selected", "item": "²"},
            {"scope": "all", "shown": "1,²"},
            {"scope": "selected", "item": "9" * 30},
        ):
            r = await c.post("/dismiss", headers=SAME, data=picked)
            assert r.status_code == 303, (picked, r.status_code)
