"""During a database outage (said once itself: db.unreachable) the lease keeper says its failed
renewal once, not at every renewal (a third of the lease) until the database is back; failures
that are no outage (a lock held too long) are each said, and a renewal that commits ends the
streak, so the next outage is said again."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from structlog.testing import capture_logs

from agentd.daemon.leases import LeaseKeeper
from agentd.errors import StateError


class FailingStore:
    def __init__(self) -> None:
        self.outage: str | None = None
        self.fail = True

    async def write(self, work: Any) -> Any:
        if self.fail:
            raise StateError("db: connection refused")
        return [], []

    write_apart = write  # renewals go through the store's connection apart (Store.write_apart)


def keeper(store: FailingStore) -> LeaseKeeper:
    deps = SimpleNamespace(lease_s=30.0, store=store, owner="me:1:x")
    engine = SimpleNamespace(fenced=False, live=lambda: set())
    k = LeaseKeeper(deps, engine, shared=True)  # type: ignore[arg-type]
    k._valid_until = time.monotonic() + 3600  # never due to fence here
    return k


def said(logs: list[dict[str, Any]]) -> int:
    return sum(1 for e in logs if e["event"] == "lease.renew_failed" and e["log_level"] == "error")


async def test_renew_failed_is_said_once_per_outage() -> None:
    store = FailingStore()
    k = keeper(store)
    with capture_logs() as logs:
        assert not await k.renew()  # the first failure: said (the outage not yet known)
        store.outage = "the database db is unreachable since 04:00:00Z (1 s): refused; retrying"
        for _ in range(5):
            assert not await k.renew()
    assert said(logs) == 1

    store.fail, store.outage = False, None
    assert await k.renew()  # back: the streak ends
    store.fail, store.outage = True, "unreachable again"
    with capture_logs() as logs:
        for _ in range(3):
            assert not await k.renew()
    assert said(logs) == 1


async def test_renew_failed_without_an_outage_is_said_each_time() -> None:
    store = FailingStore()  # a lock held too long: no outage
    k = keeper(store)
    with capture_logs() as logs:
        for _ in range(3):
            assert not await k.renew()
    assert said(logs) == 3
