"""Long maintenance (retention) has its own statement timeout: the lease's (at least 5 s), which
every other statement of a daemon on PostgreSQL gets, would cancel it at every hourly attempt on a
big database, and the writer's client deadline would cut its connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.db.outage import own_timeout, unhurried
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store
from agentd.errors import StateError


def slow(c: Any) -> int:
    return int(c.execute("SELECT pg_sleep(5.5), 7").fetchone()[1])


async def test_unhurried_work_outlives_the_lease_timeout_that_cancels_plain_work(
    pg_url: str, tmp_path: Path
) -> None:
    backend = PostgresBackend(pg_url, tmp_path, lease_s=1.0)  # statement timeout: 5 s
    store = Store(tmp_path / "agentd.db", backend=backend)
    await store.open()
    try:
        with pytest.raises(StateError):
            await store.write(slow)  # cancelled by the server at 5 s
        assert await store.write(unhurried(slow, 30.0)) == 7
        # SET LOCAL: the next batch has the lease's timeout again
        with pytest.raises(StateError):
            await store.write(slow)
    finally:
        await store.close()


async def test_unhurried_is_plain_work_on_sqlite(tmp_path: Path) -> None:
    store = Store(tmp_path / "agentd.db")
    await store.open()
    try:
        work = unhurried(lambda c: c.execute("SELECT 3").fetchone()[0], 60.0)
        assert own_timeout(work) == 60.0 and own_timeout(slow) is None
        assert await store.write(work) == 3
    finally:
        await store.close()
