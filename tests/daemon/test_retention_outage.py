"""The hourly retention prune that meets a database outage is not an error of its own: the outage
was said once (`db.unreachable`); an error line each hour of it was noise (issue 31). A prune
that fails with the database up (a lock held too long) is still an error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agentd.daemon.retention import retention
from agentd.db.outage import Outage
from agentd.errors import StateError


def deps_failing(outage: str | None, stop: asyncio.Event) -> Any:
    async def read(work: Any) -> Any:
        stop.set()  # one pass
        raise StateError("db: unreachable")

    config = SimpleNamespace(daemon=SimpleNamespace(journal_retention_days=30))
    return SimpleNamespace(config=config, store=SimpleNamespace(read=read, outage=outage))


@pytest.fixture(autouse=True)
def every_level() -> Iterator[None]:
    """Debug lines reach capture_logs whatever an earlier test of this worker configured (a
    daemon's `log.configure("info")` filters debug out before any processor sees it)."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.mark.parametrize("down", [True, False])
async def test_a_prune_failing_in_an_outage_is_not_an_error(down: bool) -> None:
    outage = Outage("db")  # what Store.outage says: its description while it lasts
    if down:
        with capture_logs():
            outage.failed("server closed the connection unexpectedly")
    stop = asyncio.Event()
    with capture_logs() as logs:
        await retention(deps_failing(outage.describe(), stop), stop)
    [said] = [e for e in logs if e["event"] == "journal.prune_failed"]
    assert said["log_level"] == ("debug" if down else "error")
