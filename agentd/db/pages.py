"""Lists read a page at a time (issue 35): keyset paging on the table's id — rows after the last id
a page showed, in the list's order, at most a limit — with the total of rows that match, so a list
of 100,000 goals costs its page plus one indexed count, and the next page starts where this one
ended whatever was added meanwhile. `count` and `chunk` are the same reads in pieces, for a list
written out as it is read (`--json` streams: agentd/operator/listing.py)."""

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


@dataclass(frozen=True)
class Table:
    """One list: its table, columns, key (the id pages go by), order and row conversion."""

    name: str
    cols: str
    key: str
    newest_first: bool
    convert: Callable[[tuple[Any, ...]], Any]


GOALS = Table("goals", GOAL_COLS, "goal_id", False, goal_from_row)
RUNS = Table("runs", RUN_COLS, "run_id", True, run_from_row)
EVENTS = Table("events", EVENT_COLS, "event_id", True, event_from_row)
ITEMS = Table("inbox", ITEM_COLS, "item_id", False, item_from_row)


def _where(filters: dict[str, Any]) -> tuple[list[str], list[Any]]:
    return ([f"{k} = ?" for k, v in filters.items() if v is not None],
            [v for v in filters.values() if v is not None])  # fmt: skip


def count(c: Conn, t: Table, filters: dict[str, Any]) -> tuple[int, int | None]:
    """(how many rows match, the highest id among them): one indexed read."""
    where, params = _where(filters)
    total, top = c.execute(
        f"SELECT count(*), max({t.key}) FROM {t.name}"
        + (" WHERE " + " AND ".join(where) if where else ""),
        params,
    ).fetchone()
    return int(total), None if top is None else int(top)


def chunk(
    c: Conn, t: Table, filters: dict[str, Any], after: int | None, n: int, upto: int | None = None
) -> list[tuple[Any, ...]]:
    """At most `n` raw rows (the key first) after id `after` in the list's order, none past id
    `upto` (a stream's bound: rows added while it is written are not in it)."""
    where, params = _where(filters)
    if after is not None:
        where.append(f"{t.key} {'<' if t.newest_first else '>'} ?")
        params.append(after)
    if upto is not None:
        where.append(f"{t.key} <= ?")
        params.append(upto)
    return c.execute(
        f"SELECT {t.cols} FROM {t.name}" + (" WHERE " + " AND ".join(where) if where else "")
        + f" ORDER BY {t.key}{' DESC' if t.newest_first else ''} LIMIT ?",
        (*params, n),
    ).fetchall()  # fmt: skip


def behind(
    c: Conn, t: Table, filters: dict[str, Any], first: int, n: int
) -> tuple[int, int | None]:
    """For a page whose first row would be id `first` (of a list oldest first): (how many rows
    come before it, the `after` of the page of `n` before it — None when that is the first
    page or there is none: the count tells which)."""
    where, params = _where(filters)
    where.append(f"{t.key} < ?")
    params.append(first)
    sql = " WHERE " + " AND ".join(where)
    before = int(c.execute(f"SELECT count(*) FROM {t.name}{sql}", params).fetchone()[0])
    if before <= n:
        return before, None
    row = c.execute(
        f"SELECT {t.key} FROM {t.name}{sql} ORDER BY {t.key} DESC LIMIT 1 OFFSET ?", (*params, n)
    ).fetchone()
    return before, int(row[0])


def waiting(c: Conn) -> dict[str, int]:
    """{kind: n} of the open approvals and questions (`inbox_waiting`: only they are read)."""
    rows = c.execute(
        "SELECT kind, count(*) FROM inbox WHERE status = 'open'"
        " AND kind IN ('approval', 'question') GROUP BY kind"
    )
    return {str(k): int(n) for k, n in rows}


def _page(
    c: Conn, t: Table, filters: dict[str, Any], after: int | None, limit: int | None
) -> Page[Any]:
    total, _ = count(c, t, filters)
    n = NO_LIMIT if limit is None else limit
    rows = chunk(c, t, filters, after, n + 1)
    more = len(rows) > n
    rows = rows[:n]
    return Page([t.convert(r) for r in rows], total, int(rows[-1][0]) if more else None)


def goals(c: Conn, *, status: str | None, after: int | None, limit: int | None) -> Page[Any]:
    """Goals, oldest first."""
    return _page(c, GOALS, {"status": status}, after, limit)


def runs(
    c: Conn, *, goal_id: int | None, status: str | None, after: int | None, limit: int | None
) -> Page[Any]:
    """Runs, newest first."""
    return _page(c, RUNS, {"goal_id": goal_id, "status": status}, after, limit)


def events(c: Conn, *, after: int | None, limit: int | None) -> Page[Any]:
    """Events, newest first."""
    return _page(c, EVENTS, {}, after, limit)


def items(c: Conn, *, filters: dict[str, Any], after: int | None, limit: int | None) -> Page[Any]:
    """Inbox items, oldest first, narrowed by the columns `filters` names (None: any)."""
    return _page(c, ITEMS, filters, after, limit)
