"""The writer redoes a batch whose connection was lost under it on a new connection, not on the dead
one (issue 31). A batch whose work failed is rolled back and redone one request per transaction;
when the failure was the connection itself (the server restarted, a reset), every redo used to
fail with "the connection is closed" — at error level, before any outage was declared — and each
caller got that error (seen as `db.commit_failed` and a run spending a retry in the outage test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store


async def test_a_batch_that_lost_its_connection_is_redone_on_a_new_one(
    pg_url: str, tmp_path: Path
) -> None:
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    await store.open()
    calls: list[int] = []

    def add_once_cut(c: Any) -> int:
        """Its first run loses its connection (the server ends the session), as a restart does."""
        calls.append(1)
        if len(calls) == 1:
            c.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None)

    try:
        with capture_logs() as logs:
            goal = await store.write(add_once_cut)
        assert len(calls) == 2 and goal > 0
        assert await store.read(lambda c: [g.goal_id for g in q.list_goals(c)]) == [goal]
        said = [e["event"] for e in logs]
        assert "db.commit_failed" not in said and "db.reconnecting" in said, said
        assert store.outage is None  # the server is well: no outage
    finally:
        await store.close(5)
