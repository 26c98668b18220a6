"""What `statement_timeout` a connection gets on PostgreSQL (issue 31, docs/scale-out.md): the daemon's
are bounded by the lease (at least 5 s); the CLI's (SyncStore) reads are not bounded at all — a long
listing, an export is never cancelled, and a read holds no lock a daemon's write waits on — while
its write transactions still are (they hold row locks the daemons need)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store, SyncStore


def timeout(c: Any) -> str:
    return str(c.execute("SHOW statement_timeout").fetchone()[0])


def test_the_clis_reads_are_unbounded_and_its_writes_bounded_by_the_lease(
    pg_url: str, tmp_path: Path
) -> None:
    backend = PostgresBackend(pg_url, tmp_path, lease_s=7)
    SyncStore(tmp_path / "agentd.db", backend=backend).close()  # created and migrated
    store = SyncStore(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path, lease_s=7))
    try:
        assert store.read(timeout) == "0"
        during = store.write(
            lambda c: (
                q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None),
                timeout(c),
            )[1]
        )
        assert during == "7s"
        assert store.read(timeout) == "0"  # SET LOCAL: only that transaction
        assert store.read(lambda c: len(q.list_goals(c))) == 1  # the write committed
    finally:
        store.close()


async def test_the_daemons_connections_stay_bounded_by_the_lease(
    pg_url: str, tmp_path: Path
) -> None:
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path, lease_s=7))
    await store.open()
    try:
        assert await store.read(timeout) == "7s"
        assert await store.write(timeout) == "7s"
        assert await store.write_apart(timeout) == "7s"
    finally:
        await store.close(5)
