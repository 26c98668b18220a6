"""`Store.write_apart` (the lease keeper's connection of its own) lives a PostgreSQL outage as the
writer does (db/outage.py): failing to reach the database is the outage's, said once
(`db.unreachable`), tried again only after its backoff, every failure a StateError, and the first
commit after it says `db.reachable`. Before, its connection bypassed the outage: a renewal failing
while the writer was idle left `Store.outage` unset (so `lease.renew_failed` was said at every
renewal), and an error met while setting a new session up escaped as a driver error."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store
from agentd.errors import StateError
from tests.pg_cluster import Cluster
from tests.tcp_proxy import Proxy


def add(c: Any) -> int:
    return q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None)


async def test_a_write_apart_rides_out_an_outage_as_the_writer_does(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster
) -> None:
    proxy = Proxy(pg_cluster.socket).start()
    url = proxy.url(pg_url.split("/")[3].split("?")[0])
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(url, tmp_path))
    await store.open()
    try:
        await store.write_apart(add)  # its connection opened
        proxy.reset()  # every connection reset, new ones refused
        with capture_logs() as logs:
            for _ in range(3):  # the stale connection, a refused one, one within the backoff
                with pytest.raises(StateError):
                    await store.write_apart(add)
            assert store.outage is not None  # the writer, idle, never saw it: the outage knows
            proxy.resume()
            give_up = time.monotonic() + 60
            while True:  # the backoff passes, then a new connection commits
                try:
                    await store.write_apart(add)
                    break
                except StateError:
                    assert time.monotonic() < give_up, "write_apart never reconnected"
                    time.sleep(0.05)
        assert store.outage is None
        said = [e["event"] for e in logs]
        assert said.count("db.unreachable") == 1 and said.count("db.reachable") == 1, said
        goals = await store.read(lambda c: len(q.list_goals(c)))
        assert goals == 2
    finally:
        await store.close(5)
        proxy.close()
