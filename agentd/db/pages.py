"""Lists read a page at a time (issue 35): keyset paging on the table's id — rows after the last id
a page showed, in the list's order, at most a limit — with the total of rows that match, so a list
of 100,000 goals costs its page plus one indexed count, and the next page starts where this one
ended whatever was added meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentd.db.conn import Conn
from agentd.db.items import EVENT_COLS, ITEM_COLS, event_from_row, item_from_row
from agentd.db.rows import GOAL_COLS, RUN_COLS, goal_from_row, run_from_row

T = TypeVar("T")
NO_LIMIT = 2**62  # LIMIT takes a number on both engines


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]
    total: int  # rows matching the filters, on every page
    next_after: int | None  # the id to pass as `after` for the next page (None: this is the last)


def _page(
    c: Conn, table: str, cols: str, key: str, filters: dict[str, Any], after: int | None,
    limit: int | None, newest_first: bool, convert: Callable[[tuple[Any, ...]], T],
) -> Page[T]:  # fmt: skip
    where = [f"{k} = ?" for k, v in filters.items() if v is not None]
    params = [v for v in filters.values() if v is not None]
    total = c.execute(
        f"SELECT count(*) FROM {table}" + (" WHERE " + " AND ".join(where) if where else ""),
        params,
    ).fetchone()[0]
    if after is not None:
        where.append(f"{key} {'<' if newest_first else '>'} ?")
        params.append(after)
    n = NO_LIMIT if limit is None else limit
    rows = c.execute(
        f"SELECT {cols} FROM {table}" + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY {key}{' DESC' if newest_first else ''} LIMIT ?",
        (*params, n + 1),
    ).fetchall()  # fmt: skip
    more = len(rows) > n
    rows = rows[:n]
    return Page([convert(r) for r in rows], int(total), int(rows[-1][0]) if more else None)


def goals(c: Conn, *, status: str | None, after: int | None, limit: int | None) -> Page[Any]:
    """Goals, oldest first."""
    return _page(c, "goals", GOAL_COLS, "goal_id", {"status": status}, after, limit, False,
                 goal_from_row)  # fmt: skip


def runs(
    c: Conn, *, goal_id: int | None, status: str | None, after: int | None, limit: int | None
) -> Page[Any]:
    """Runs, newest first."""
    return _page(c, "runs", RUN_COLS, "run_id", {"goal_id": goal_id, "status": status}, after,
                 limit, True, run_from_row)  # fmt: skip


def events(c: Conn, *, after: int | None, limit: int | None) -> Page[Any]:
    """Events, newest first."""
    return _page(c, "events", EVENT_COLS, "event_id", {}, after, limit, True, event_from_row)


def items(c: Conn, *, filters: dict[str, Any], after: int | None, limit: int | None) -> Page[Any]:
    """Inbox items, oldest first, narrowed by the columns `filters` names (None: any)."""
    return _page(c, "inbox", ITEM_COLS, "item_id", filters, after, limit, False, item_from_row)
