"""The daemon's Store outlives a PostgreSQL connection the server closed (a restart, a failover, a
session ended for idling in a transaction while the daemon was frozen): the write in flight fails
as a database error its caller retries, and the next read and write open a new connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.postgres.connection import connect
from agentd.db.store import Store
from agentd.errors import StateError


def terminate_others(url: str) -> set[int]:
    """End every other client session of the database; returns their server pids. Only client
    sessions: an autovacuum worker also lists the database while it tidies the test's rows."""
    admin = connect(url)
    try:
        rows = admin.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid != pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchall()
        return {int(row[0]) for row in rows}
    finally:
        admin.close()


def backend_pid(c: object) -> int:
    return int(c.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[attr-defined]


async def test_store_opens_a_new_connection_after_the_server_closed_it(
    pg_url: str, tmp_path: Path
) -> None:
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    await store.open()
    try:

        def add(c: object) -> int:
            return q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None)  # type: ignore[arg-type]

        first = await store.write(add)
        sessions = {await store.write(backend_pid), await store.read(backend_pid)}
        assert len(sessions) == 2  # the writer's and the reader's: all the store holds
        assert terminate_others(pg_url) == sessions
        with pytest.raises(StateError):  # the write in flight meets the closed connection
            await store.write(add)
        second = await store.write(add)  # a new connection
        goals = await store.read(lambda c: [g.goal_id for g in q.list_goals(c)])
        assert goals == [first, second]
        assert await store.read(q.count_runs) == {}
    finally:
        await store.close()


async def test_a_writer_whose_server_became_read_only_reconnects(
    pg_url: str, tmp_path: Path
) -> None:
    """A failover that demotes the server under the writer's session: its writes fail as read-only,
    the writer closes that connection, and the next write goes through on a new one (where the
    URL leads: the new primary; here the same server, writable again for a new session)."""
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    await store.open()
    try:

        def add(c: object) -> int:
            return q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None)  # type: ignore[arg-type]

        await store.write(lambda c: c.execute("SET default_transaction_read_only = on"))
        with pytest.raises(StateError, match="read-only"):
            await store.write(add)
        assert await store.write(add) == 1
        assert not store.errors.failing()
    finally:
        await store.close()
