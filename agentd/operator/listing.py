"""The lists every surface pages the same way (issue 35): goals, runs, events and inbox items, a
page at a time after an id, with the total that matches (agentd/db/pages.py). One read each."""

from __future__ import annotations

from typing import Any

from agentd.db import items as qi
from agentd.db import pages
from agentd.db import queries as q
from agentd.db.pages import Page as Page  # re-exported: the surfaces name it
from agentd.db.store import SyncStore
from agentd.models import Goal, InboxItem


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


def items(store: SyncStore, show_all: bool, after: int | None, limit: int | None) -> Page[Any]:
    """Open inbox items (every item with `show_all`), oldest first, after item `after`."""
    status = None if show_all else "open"
    return store.read(lambda c: pages.items(c, status=status, after=after, limit=limit))


def items_with_status(store: SyncStore, status: str | None) -> list[InboxItem]:
    """Inbox items with this status (None: every item), oldest first (the status index)."""
    return store.read(lambda c: qi.list_items(c, status=status))


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
