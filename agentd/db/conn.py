"""The connection every query is written against: just the DB-API calls the queries make (execute,
executemany, the cursor's fetches, rowcount and lastrowid, and the IntegrityError a broken
constraint raises). sqlite3's connection satisfies it today; a PostgreSQL connection behind the
same few calls can stand in for it later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    """What a query reads back from one statement."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

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


Work = Callable[[Conn], T]  # what a store runs in one transaction (a write) or on its reader
