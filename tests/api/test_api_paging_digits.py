"""A hand-written `?after=` or `?limit=` the store's integer cannot hold — 30 digits, or '²'
(`str.isdigit` says yes, `int` refuses) — is a 400 with a one-sentence JSON error, not a 500 from
the store (agentd/web/ids.py's `number`, the web pages' parser, decides), on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_api_paging import CONFIG, FINISH, client
from tests.conftest import Home

pytestmark = pytest.mark.backends

BAD = ["1" * 30, "²", "٣", "9" * 19]


async def test_paging_values_the_store_cannot_hold_are_a_400(home: Home, serve: Any) -> None:
    home.write_config(CONFIG, [FINISH])
    await serve()
    answers = []
    async with client(home) as c:
        for path in ("/api/goals", "/api/inbox"):
            for value in BAD:
                answers.append((path, "after", await c.get(path, params={"after": value})))
                answers.append((path, "limit", await c.get(path, params={"limit": value})))
        largest = await c.get("/api/goals", params={"after": "9" * 18, "limit": "9" * 18})
    for path, key, answer in answers:
        assert answer.status_code == 400, (path, key, answer.text)
        error = answer.json()["error"]
        assert error.startswith(f"{key}=") and "at most 18 digits" in error
    assert largest.status_code == 200 and largest.json()["goals"] == []
