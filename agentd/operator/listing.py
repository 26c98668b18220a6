"""The lists every surface pages the same way (issue 35): goals, runs, events and inbox items, a
page at a time after an id, with the total that matches (agentd/db/pages.py). One read each — or,
for a list written out as it is read (`--json`), a `Stream`: the total first, then the rows in
short reads of a few hundred, so memory stays flat whatever the list's length."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agentd.db import pages
from agentd.db import queries as q
from agentd.db.pages import Page as Page  # re-exported: the surfaces name it
from agentd.db.store import SyncStore
from agentd.models import Goal
from agentd.operator import inbox


def goals(store: SyncStore, status: str | None, after: int | None, limit: int | None) -> Page[Any]:
    """Goals, oldest first, after goal `after`."""
    return store.read(lambda c: pages.goals(c, status=status, after=after, limit=limit))


def runs(
    store: SyncStore, goal_id: int | None, status: str | None, after: int | None, limit: int
) -> Page[Any]:
    """Runs, newest first, before run `after`."""
    return store.read(
        lambda c: pages.runs(c, goal_id=goal_id, status=status, after=after, limit=limit)
    )


def events(store: SyncStore, after: int | None, limit: int) -> Page[Any]:
    """Events, newest first, before event `after`."""
    return store.read(lambda c: pages.events(c, after=after, limit=limit))


def items(
    store: SyncStore, wanted: inbox.Filter, after: int | None, limit: int | None
) -> Page[Any]:
    """The inbox items `wanted` keeps (the web's and `inbox list`'s filters), oldest first, after
    item `after`."""
    page = store.read(lambda c: pages.items(c, filters=wanted.columns(), after=after, limit=limit))
    return Page([i for i in page.rows if wanted.keeps(i)], page.total, page.next_after)


FIRST_CHUNK = 100  # rows of a stream's first read: the first rows are out at once
CHUNK = 1000  # rows of each read after it


class Stream:
    """A list read in pieces: `total` (and the bound: rows added while it is written are not
    in it) is read first; iterating yields the rows, each piece in its own short read; once
    they are all out, `next_after` is the next page's `after` (None: this was the last page).
    `keep` narrows after the database did (an inbox filter's withdrawn items)."""

    def __init__(
        self, store: SyncStore, table: pages.Table, filters: dict[str, Any], after: int | None,
        limit: int | None, keep: Callable[[Any], bool] | None = None,
    ) -> None:  # fmt: skip
        self.store, self.table, self.filters = store, table, filters
        self.after, self.limit, self.keep = after, limit, keep
        self.total, top = store.read(lambda c: pages.count(c, table, filters))
        self.upto = None if table.newest_first else top
        self.next_after: int | None = None

    def __iter__(self) -> Iterator[Any]:
        cursor, left = self.after, pages.NO_LIMIT if self.limit is None else self.limit
        n = FIRST_CHUNK
        while left > 0:
            want = min(n, left)
            rows = self._read(cursor, want)
            for r in rows:
                row = self.table.convert(r)
                if self.keep is None or self.keep(row):
                    yield row
            if len(rows) < want:
                return  # the last rows there are: no next page
            cursor, left, n = int(rows[-1][0]), left - want, CHUNK
        if self._read(cursor, 1):  # the limit is reached: is there more?
            self.next_after = cursor

    def _read(self, after: int | None, n: int) -> list[tuple[Any, ...]]:
        t, f, upto = self.table, self.filters, self.upto
        return self.store.read(lambda c: pages.chunk(c, t, f, after, n, upto))


def goal_stream(
    store: SyncStore, status: str | None, after: int | None, limit: int | None
) -> Stream:
    return Stream(store, pages.GOALS, {"status": status}, after, limit)


def run_stream(
    store: SyncStore, goal_id: int | None, status: str | None, after: int | None, limit: int
) -> Stream:
    return Stream(store, pages.RUNS, {"goal_id": goal_id, "status": status}, after, limit)


def event_stream(store: SyncStore, after: int | None, limit: int) -> Stream:
    return Stream(store, pages.EVENTS, {}, after, limit)


def item_stream(
    store: SyncStore, wanted: inbox.Filter, after: int | None, limit: int | None
) -> Stream:
    return Stream(store, pages.ITEMS, wanted.columns(), after, limit, wanted.keeps)


@dataclass(frozen=True)
class Around:
    """A page of a list oldest first, placed in it: how many rows come before it, and the
    previous page's `after` (`previous`: whether there is one; `prev_after` None: the first)."""

    page: Page[Any]
    before: int
    previous: bool
    prev_after: int | None
    waiting: dict[str, int] | None = None  # {kind: n} open approvals and questions, if asked


def items_around(
    store: SyncStore, wanted: inbox.Filter, after: int | None, limit: int, *, waiting: bool = False
) -> Around:
    """`items`, with where the page sits (the web inbox's pager), in one read; `waiting`: with
    the counts of open approvals and questions when the page is not the whole list."""
    cols = wanted.columns()

    def read(c: Any) -> Around:
        page = pages.items(c, filters=cols, after=after, limit=limit)
        if not page.rows and after is None:
            return Around(page, 0, False, None)
        # The rows `keeps` drops below still count for the page's place.
        first = page.rows[0].item_id if page.rows else (after or 0) + 1
        before, prev_after = pages.behind(c, pages.ITEMS, cols, first, limit)
        whole = before == 0 and page.next_after is None
        counts = pages.waiting(c) if waiting and not whole else None
        return Around(page, before, before > 0, prev_after, counts)

    around = store.read(read)
    kept = Page([i for i in around.page.rows if wanted.keeps(i)], around.page.total,
                around.page.next_after)  # fmt: skip
    return Around(kept, around.before, around.previous, around.prev_after, around.waiting)


def goals_by_id(store: SyncStore, goal_ids: set[int]) -> dict[int, Goal]:
    """The goals with these ids, by id (one read; ids that name no goal are left out)."""

    def read(c: Any) -> dict[int, Goal]:
        return {g: q.get_goal(c, g) for g in sorted(goal_ids)}

    return store.read(read) if goal_ids else {}


def footer(page: Page[Any], noun: str) -> str:
    """The line under a page that is not the last: how many of how many, and the next page."""
    if page.next_after is None:
        return ""
    return (
        f"\n{len(page.rows)} of {page.total:,} {noun} shown; the next page: "
        f"--after {page.next_after}"
    )
