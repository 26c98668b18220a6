"""A batch redone on a new connection (its own was lost under it: a restart, a reset) is timed on
that new connection (issue 31). The batch's deadline timed the connection it began on; a redo on
the reopened one that the database then never answered (a stall, a partition with TCP up) waited
for ever — the writer thread, every caller behind it, and the daemon's stop with them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store
from agentd.errors import StateError
from tests.pg_cluster import Cluster
from tests.tcp_proxy import Proxy


@pytest.mark.timeout(120)
async def test_a_redo_on_a_reopened_connection_that_stalls_is_cut_by_the_deadline(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster
) -> None:
    proxy = Proxy(pg_cluster.socket).start()
    url = proxy.url(pg_url.split("/")[3].split("?")[0])
    backend = PostgresBackend(url, tmp_path, lease_s=1)  # the shortest deadline: 5 s + 2 s
    store = Store(tmp_path / "agentd.db", backend=backend)
    await store.open()
    connect = backend.connect

    def connect_then_stall(**kw: Any) -> Any:
        """The reopen succeeds; then the route stalls (nothing flows, TCP stays up)."""
        conn = connect(**kw)
        proxy.blackhole()
        return conn

    calls: list[int] = []

    def add_once_cut(c: Any) -> int:
        calls.append(1)
        if len(calls) == 1:  # the batch loses its connection, as at a restart
            c.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None)

    backend.connect = connect_then_stall  # type: ignore[method-assign]
    try:
        with pytest.raises(StateError):  # cut by the deadline: never a wait for ever
            await asyncio.wait_for(store.write(add_once_cut), 60)
        assert len(calls) == 1  # the redo never got an answer
    finally:
        proxy.resume()
        proxy.close()  # ends a stalled pair: the old code's writer thread returns
        await store.close(10)
