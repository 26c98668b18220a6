"""The web inbox's default view reads only the open items (issue 35): closed items pile up for
ever, and the page that shows what waits for a decision must not read them all. SQLite's virtual
machine steps counted (as tests/outer/test_due_scan.py does) at 20 and 2,000 closed items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentd.db import items as qi
from agentd.models import InboxKind
from agentd.web import data
from agentd.web.inbox_page import Filters
from tests.conftest import Home

T = TypeVar("T")
CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "finish"]
"""


def counted(conn: Any, read: Callable[[], T]) -> tuple[T, int]:
    """What `read` returns, and the SQLite virtual machine steps (a progress handler every 100
    instructions) it took on `conn`."""
    count = [0]

    def step() -> int:
        count[0] += 1
        return 0

    conn.set_progress_handler(step, 100)
    try:
        return read(), count[0]
    finally:
        conn.set_progress_handler(None, 0)


def post(home: Home, n: int, closed: bool) -> None:
    def work(c: Any) -> None:
        for i in range(n):
            item = qi.post(c, InboxKind.NOTICE, title=f"notice {i}")
            if closed:
                c.execute("UPDATE inbox SET status = 'dismissed' WHERE item_id = ?", (item,))

    home.store.write(work)


def test_the_default_inbox_view_reads_only_open_items(home: Home) -> None:
    home.write_config(CONFIG, [])
    post(home, 2, closed=False)
    conn: Any = home.store.conn
    steps = []
    for closed in (20, 2000):
        post(home, closed, closed=True)
        (items, _), n = counted(conn, lambda: data.inbox_view(home.store, Filters().shared))
        assert [i.title for i in items] == ["notice 0", "notice 1"]
        steps.append(n)
    assert steps[1] <= steps[0] * 1.5 + 5, steps  # 100 times the closed items, the same work
    shown, _ = data.inbox_view(home.store, Filters(status="all").shared)
    assert len(shown) == 2022  # asked for every item: every item
