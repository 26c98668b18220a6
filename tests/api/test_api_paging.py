"""The JSON API's lists page as the CLI's do (issue 35): `/api/goals` and `/api/inbox` with
`?limit=N&after=ID` answer a page, the total and the next `after`; without them, the whole list
as before; a bad value is a 400 that says what to give."""

from __future__ import annotations

from typing import Any

import httpx

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import InboxKind
from tests.conftest import Home

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def client(home: Home) -> httpx.AsyncClient:
    token = home.paths.api_token.read_text().strip()
    transport = httpx.AsyncHTTPTransport(uds=str(home.paths.api_sock))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost",
                             headers={"Authorization": f"Bearer {token}"})  # fmt: skip


async def test_api_lists_page_with_a_total(home: Home, serve: Any) -> None:
    home.write_config(CONFIG, [FINISH])

    def fill(c: Any) -> None:
        for n in range(7):
            g = q.add_goal(c, title=f"goal {n}", why="paging", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            qi.post(c, InboxKind.NOTICE, title=f"notice {n}", goal_id=g)

    home.store.write(fill)
    await serve()
    async with client(home) as c:
        first = (await c.get("/api/goals", params={"limit": 3})).json()
        second = (await c.get("/api/goals", params={"limit": 3, "after": 3})).json()
        items = (await c.get("/api/inbox", params={"limit": 5, "after": 5})).json()
        whole = (await c.get("/api/goals")).json()
        bad = await c.get("/api/inbox", params={"limit": "0"})
    assert [g["goal_id"] for g in first["goals"]] == [1, 2, 3]
    assert (first["total"], first["next_after"]) == (7, 3)
    assert [g["goal_id"] for g in second["goals"]] == [4, 5, 6] and second["next_after"] == 6
    assert [i["item_id"] for i in items["items"]] == [6, 7] and items["next_after"] is None
    assert items["total"] == 7
    assert [g["goal_id"] for g in whole] == list(range(1, 8))
    assert bad.status_code == 400 and "limit" in bad.json()["error"]
