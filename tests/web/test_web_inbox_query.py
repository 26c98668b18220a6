"""A hand-edited inbox address is said, never a server error: `?after=`, `?limit=` and `?goal=`
take ASCII digits of a size the store holds — Python's `isdigit` also says yes to '²' or '٣',
which `int` refuses or reads — else the page shows the open items with one sentence on what was
not shown as asked. And whatever a query holds, the page's links carry only what the filters
parsed: nothing of it is echoed into them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentd.errors import UsageError
from agentd.web.inbox_page import Filters
from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home
from tests.web.test_web import login, web
from tests.web.test_web_inbox_pager import notices

BAD = ["after=%C2%B2", "limit=%C2%B2", "goal=%C2%B2", "after=%D9%A3", "goal=%D9%A3",
       "goal=" + "9" * 30, "limit=" + "9" * 40, "after=" + "1" * 25]  # fmt: skip


@pytest.mark.parametrize("value", ["²", "٣", "１", "9" * 19, "-1", " 1", "1 "])
def test_only_ascii_digits_of_a_storable_size_are_numbers(value: str) -> None:
    for key in ("after", "goal", "limit"):
        with pytest.raises(UsageError):
            Filters.parse({key: value})


async def test_a_hand_edited_address_is_said_not_a_server_error(home: Home, serve: Any) -> None:
    home.write_config(with_web(scripted_home(["finish"])), [FINISH])
    notices(home, 3)
    await serve()
    async with web(home) as c:
        await login(c, home)
        for query in BAD:
            r = await c.get(f"/?{query}")
            assert r.status_code == 200, (query, r.status_code)
            assert "Not shown as asked" in r.text, query
            assert len(re.findall(r'id="item-\d+"', r.text)) == 3  # the open items, shown
        hostile = '"><script>alert(1)</script>'
        r = await c.get("/", params={"kind": "notice", "status": "all", "limit": "2",
                                     "after": "1", "x": hostile})  # fmt: skip
        assert r.status_code == 200 and "<script>alert" not in r.text
        hrefs = re.findall(r'href="([^"]*)" rel="(?:prev|next)"', r.text)
        assert hrefs and all(re.fullmatch(r"/\?[a-z=&;0-9]*", h) for h in hrefs), hrefs
