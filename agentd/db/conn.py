"""The connection every query is written against: just the DB-API calls the queries make (execute,
executemany, the cursor's fetches and rowcount, and the IntegrityError a broken constraint
raises), plus the engine's SQL hooks (`dialect`, db/dialect.py). The SQLite backend's
connection (sqlite3's, with its dialect) satisfies it; a PostgreSQL one behind the same few calls
stands in for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from agentd.db.dialect import Dialect

T = TypeVar("T")


class Cursor(Protocol):
    """What a query reads back from one statement."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside the transaction the store opened for the query (or between them, to read)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...

    @property
    def IntegrityError(self) -> type[Exception]:  # DB-API's name
        """What a broken constraint raises (DB-API's optional extension: sqlite3's connection
        has it), so a query can tell one apart without importing the driver."""
        ...

    def close(self) -> None: ...

    @property
    def dialect(self) -> Dialect:
        """The engine's forms of what its SQL does differently (db/dialect.py)."""
        ...


Work = Callable[[Conn], T]  # what a store runs in one transaction (a write) or on its reader


def returned_id(cur: Cursor) -> int | None:
    """The id a one-row `INSERT … RETURNING <id>` gave back; None when `ON CONFLICT DO NOTHING`
    inserted nothing. Every row is read: an SQLite statement with rows left unread would keep
    the transaction from committing ("SQL statements in progress")."""
    rows = cur.fetchall()
    return int(rows[0][0]) if rows else None


def new_id(cur: Cursor) -> int:
    """The id a one-row `INSERT … RETURNING <id>` (that cannot be skipped) gave back."""
    found = returned_id(cur)
    assert found is not None, "an INSERT without ON CONFLICT inserts its row or raises"
    return found
