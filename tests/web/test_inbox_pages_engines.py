"""The web inbox's pager at its edges, on each engine: an empty list, exactly one page, one item
more, an item deleted between two pages, a page after an id that is gone, a filter with `after`,
and the count of what waits for a decision on other pages (`listing.items_around`, `Pager.of`)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind
from agentd.operator import inbox, listing
from agentd.web.inbox_page import Filters, Pager
from tests.conftest import Home

pytestmark = pytest.mark.backends
OPEN = inbox.Filter()


def post(home: Home, kinds: list[InboxKind]) -> list[int]:
    return list(home.store.write(lambda c: [qi.post(c, k, title=f"{k} {i}")
                                            for i, k in enumerate(kinds)]))  # fmt: skip


def place(home: Home, wanted: inbox.Filter, after: int | None, limit: int) -> tuple[Any, ...]:
    a = listing.items_around(home.store, wanted, after, limit, waiting=True)
    return ([i.item_id for i in a.page.rows], a.page.total, a.page.next_after, a.before,
            a.previous, a.prev_after)  # fmt: skip


def test_the_pager_at_its_edges(home: Home) -> None:
    home.root.mkdir(parents=True)
    assert place(home, OPEN, None, 5) == ([], 0, None, 0, False, None)  # empty
    assert place(home, OPEN, 7, 5) == ([], 0, None, 0, False, None)  # empty, after an id
    ids = post(home, [InboxKind.NOTICE] * 5)
    assert place(home, OPEN, None, 5) == (ids, 5, None, 0, False, None)  # exactly one page
    ids += post(home, [InboxKind.NOTICE])
    assert place(home, OPEN, None, 5) == (ids[:5], 6, ids[4], 0, False, None)
    assert place(home, OPEN, ids[4], 5) == (ids[5:], 6, None, 5, True, None)  # back: the first
    home.store.write(lambda c: c.execute("DELETE FROM inbox WHERE item_id = ?", (ids[2],)))
    assert place(home, OPEN, ids[4], 5) == (ids[5:], 5, None, 4, True, None)
    home.store.write(lambda c: c.execute("DELETE FROM inbox WHERE item_id = ?", (ids[4],)))
    assert place(home, OPEN, ids[4], 5) == (ids[5:], 4, None, 3, True, None)  # `after` is gone
    assert place(home, OPEN, ids[-1] + 100, 2) == ([], 4, None, 4, True, ids[1])  # past the end


def test_a_filter_with_after_and_what_waits_elsewhere(home: Home) -> None:
    home.root.mkdir(parents=True)
    kinds = [InboxKind.NOTICE, InboxKind.APPROVAL, InboxKind.QUESTION] * 4
    ids = post(home, kinds)
    notices = [i for i, k in zip(ids, kinds, strict=True) if k == InboxKind.NOTICE]
    only = inbox.Filter(kind="notice")
    assert place(home, only, notices[0], 2) == (notices[1:3], 4, notices[2], 1, True, None)
    assert place(home, only, notices[2], 2) == (notices[3:], 4, None, 3, True, notices[0])
    f = Filters(limit=4)
    around = listing.items_around(home.store, OPEN, ids[3], 4, waiting=True)
    pager = Pager.of(around, f)  # items 5–8: approvals 5 and 8 here, question 6 here
    assert (pager.first, pager.shown, pager.total) == (5, 4, 12)
    assert pager.elsewhere == (("approval", 2), ("question", 3))
    assert pager.prev == "/?limit=4" and pager.next == f"/?limit=4&after={ids[7]}"
    whole = listing.items_around(home.store, OPEN, None, 50, waiting=True)
    assert whole.waiting is None and Pager.of(whole, Filters()).html("top") == ""
