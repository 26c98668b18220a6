"""An id in an `/api` path the store's integer cannot hold (30 digits) is a 404 like any id
agentd does not have, not a 500 from the store's integer overflow; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_api_paging import CONFIG, FINISH, client
from tests.conftest import Home

pytestmark = pytest.mark.backends


async def test_a_30_digit_id_in_a_path_is_not_a_500(home: Home, serve: Any) -> None:
    home.write_config(CONFIG, [FINISH])
    await serve()
    huge = "1" * 30
    async with client(home) as c:
        answers = [
            await c.get(f"/api/goals/{huge}"),
            await c.get(f"/api/inbox/{huge}"),
            await c.get(f"/api/runs/{huge}"),
            await c.post(f"/api/inbox/{huge}/approve", json={}),
        ]
    for answer in answers:
        assert answer.status_code in (400, 404), (answer.request.url, answer.text)
        assert "error" in answer.json()
