"""The home's database as a surface holds it: `HomeStore`, the handle the web inbox and the MCP
server open (`open_store`) and pass to every operator function, and the change counter they poll
to notice another process's commit, and the home's now every view measures from (the simulated
clock of `serve --clock-speed`, or the wall). Also what makes the home's API token strong enough,
which the web's login and the CLI's poke share."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from agentd.db import poke, stamp
from agentd.db.store import SyncStore

HomeStore = SyncStore  # short transactions on one connection, one thread at a time
MIN_TOKEN_CHARS = poke.MIN_TOKEN_CHARS
strong_token = poke.strong_token


def open_store(path: Path, *, poke: bool = True, bounded: bool | None = None) -> HomeStore:
    """The store of the database at `path`. `poke=False` inside the daemon, whose writers tell it
    of their commits directly instead of over its own socket. `bounded` (by default: inside the
    daemon, `poke=False`): its reads keep the lease's statement timeout on PostgreSQL, as the
    daemon's own do — a slow read never holds a web or API request's thread for ever; the CLI's
    reads have none (db/store.py SyncStore)."""
    return SyncStore(path, poke=poke, bounded=not poke if bounded is None else bounded)


def now_s(store: HomeStore) -> float:
    """The home's now in unix seconds (agentd/db/stamp.py): the clock its rows are stamped with."""
    return float(store.read(stamp.now))


def now(store: HomeStore) -> datetime:
    """The home's now: what a view's "5m ago" counts from, on the clock its rows were stamped
    with — never the wall next to a simulated time."""
    return datetime.fromtimestamp(now_s(store), UTC)


def clock_speed(store: HomeStore) -> float | None:
    """How many times the wall's pace the home's clock runs (`serve --clock-speed N`); None on
    the wall."""
    recorded = store.read(stamp.recorded)
    return None if recorded is None else recorded[0]


def data_version(store: HomeStore) -> int:
    """The database's change counter on this connection: it moves when another connection commits."""
    return store.data_version()


def inspect_store(path: Path) -> HomeStore:
    """The store of the database at `path` as it is: never created nor migrated (what `agentd
    doctor` looks at)."""
    return SyncStore(path, migrate_schema=False)
