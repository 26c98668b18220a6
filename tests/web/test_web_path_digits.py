"""An id of more than 18 digits in a web page's path (`/goals/…`, `/items/…`, `/runs/…`, a hand-
edited address) is the not-found page, not a server error from the store's integer overflow."""

from __future__ import annotations

from typing import Any

from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home
from tests.web.test_web import login, web


async def test_a_30_digit_id_in_a_page_address_is_not_found(home: Home, serve: Any) -> None:
    home.write_config(with_web(scripted_home(["finish"])), [FINISH])
    await serve()
    huge = "1" * 30
    async with web(home) as c:
        await login(c, home)
        for path in (f"/goals/{huge}", f"/items/{huge}", f"/runs/{huge}", f"/inbox/{huge}"):
            r = await c.get(path)
            assert r.status_code == 404, (path, r.status_code)
