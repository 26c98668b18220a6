"""The seam between the stores and a database engine: a Backend opens connections and the writer,
migrates, begins write transactions, and turns the driver's errors into messages. The stores
(db/store.py) hold no engine's code; `open_backend` picks the engine: db/sqlite/, or db/postgres/
when the home's [store] names a URL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentd.db.conn import Conn
from agentd.db.dialect import Dialect
from agentd.errors import StateError

if TYPE_CHECKING:
    from agentd.db.postgres.listener import Listener
    from agentd.db.safety import ErrorRate
    from agentd.db.writer import Writer


class Backend(Protocol):
    """One database, on one engine. `label` names it in messages (a file, a URL without its
    password); `home` is the folder of the home it serves (the daemon's socket is there)."""

    @property
    def label(self) -> str: ...

    @property
    def home(self) -> Path: ...

    @property
    def dialect(self) -> Dialect: ...

    @property
    def shared(self) -> bool:
        """Whether several daemons may serve this database at once (PostgreSQL): claims then take
        only runs nobody holds, and a daemon that cannot renew its leases fences itself. False
        for SQLite, whose home lock admits one daemon."""
        ...

    @property
    def latest(self) -> int:
        """The schema version this agentd migrates to."""
        ...

    @property
    def Error(self) -> type[Exception]:  # DB-API's name, as on the Conn
        """The driver's base error: what `translate` takes."""
        ...

    def exists(self) -> bool:
        """Whether the database exists already (a new one is made and migrated at once)."""
        ...

    def read_only_reason(self) -> str | None:
        """Why this process cannot write the database, or None when it can."""
        ...

    def connect(self, *, readonly: bool = False, wal: bool = True, bounded: bool = True) -> Conn:
        """A connection with agentd's session settings, not migrated. `wal=False`: a reader that
        must not change the database's journal mode (SQLite's WAL switch writes the file).
        `bounded=False` (the CLI's): its reads have no statement timeout, its writes still the
        lease's (PostgreSQL; SQLite has none)."""
        ...

    def open_migrated(self, *, check: bool = False) -> Conn:
        """A connection to a database brought up to date; `check` looks for corruption first."""
        ...

    def prepare_writes(self, conn: Conn, *, migrate: bool) -> None:
        """Before a connection opened by `connect` first writes: what writing needs (SQLite: WAL),
        and with `migrate` the schema brought up to date."""
        ...

    def begin_write(self, conn: Conn) -> None:
        """Begin a write transaction that cannot fail halfway on a lock it must upgrade."""
        ...

    def in_transaction(self, conn: Conn) -> bool: ...

    @property
    def batch_deadline_s(self) -> float | None:
        """How long one writer batch may wait for the database before the writer cuts it off
        (`abort`) and reconnects; None: no deadline (a file)."""
        ...

    def abort(self, conn: Conn) -> None:
        """From another thread: end the statement `conn` waits on (it raises the driver's error)."""
        ...

    def broken(self, conn: Conn) -> bool:
        """Whether the connection is gone (the server closed it: a restart, a failover, a
        terminated session) and must be opened again before its next use."""
        ...

    def schema_version(self, conn: Conn) -> int: ...

    def migrate(self, conn: Conn) -> None:
        """Bring the schema up to date; refuses a schema newer than this agentd knows."""
        ...

    def newer_schema(self, conn: Conn) -> list[tuple[int, str, bool]]:
        """Migrations applied past this agentd's (version, name, breaking): a newer agentd
        sharing the database applied them (always none where one daemon owns the database)."""
        ...

    def is_empty(self, conn: Conn) -> bool:
        """Whether the database holds no schema at all."""
        ...

    def data_version(self, conn: Conn) -> int:
        """A number that changes whenever another connection commits: cheap to poll."""
        ...

    def translate(self, error: Exception) -> StateError:
        """A driver error (`Error`) as a message that says what went wrong and what to do."""
        ...

    def error_rate(self) -> ErrorRate:
        """The daemon's count of errors that say this database is unwell."""
        ...

    def writer(self, *, check: bool, errors: ErrorRate) -> Writer:
        """The daemon's one writer of this database (not opened yet)."""
        ...

    def listener(
        self, on_wake: Callable[[], None], log: Any, *, url: str | None = None
    ) -> Listener | None:
        """A started thread that calls `on_wake` when another process's commit may need this
        daemon (db/wake.py), at `url` if given (a direct connection past a pooler); None where
        nothing notifies (SQLite: the CLI pokes the one daemon over its socket)."""
        ...


def open_backend(path: Path) -> Backend:
    """The backend of the home whose SQLite file is at `path`: that file, or the PostgreSQL
    database the home's config names in `[store]` (config/where.py)."""
    from agentd.config.where import home_store

    store = home_store(path.parent)
    if store is not None:
        from agentd.db.postgres.backend import PostgresBackend  # psycopg: only a PostgreSQL home

        url, cfg = store
        return PostgresBackend(url, path.parent, lease_s=cfg.lease_s)
    from agentd.db.sqlite.backend import SQLiteBackend

    return SQLiteBackend(path)
