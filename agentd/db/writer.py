"""The daemon's write path as an interface: a Writer runs each request (a work function, or one
fenced row to insert) in a write transaction and resolves its future once that is committed.
The Store writes through one: `agentd.db.group.GroupWriter`, on any Backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from agentd.db.conn import Conn, Work

if TYPE_CHECKING:  # the daemon's write path: a CLI command that builds an Insert needs no loop
    import asyncio


@dataclass(frozen=True)
class Insert:
    """One row for a fenced `INSERT … SELECT … WHERE <fence>` that must insert exactly one row.

    Consecutive Inserts with the same SQL in a batch reach the database as one `executemany`: the
    journal's hot path costs one statement call per batch instead of one per step. `explain`
    raises the precise reason when the row was not inserted (lease lost, run not running).
    """

    FENCE: ClassVar[str] = " /*fence*/"  # in `sql`: where the engine's fence lock goes

    sql: str
    params: tuple[Any, ...]
    explain: Callable[[Conn], None]


class Writer(Protocol):
    """The one writer of a database. No caller resumes before its request is durable."""

    batches: int  # commits made; with `writes`, shows how well requests share commits
    writes: int

    async def open(self) -> None:
        """Open the database for writing (migrating it first); raises what opening raised."""
        ...

    def submit(self, work: Work[Any] | Insert, fut: asyncio.Future[Any]) -> None:
        """Queue one request; `fut` (of the running loop) gets its result or its error."""
        ...

    async def close(self, timeout_s: float | None = None) -> bool:
        """Commit everything submitted (callers were promised durability), then close; False if
        the writer had not finished after `timeout_s` (the database stopped answering)."""
        ...
