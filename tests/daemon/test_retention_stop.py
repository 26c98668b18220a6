"""A daemon stopping while retention prunes a large backlog stops between two chunks (issue 31):
the chunked prune (Store.write_chunks) repeated until nothing was left whatever the stop, so a
backlog of thousands of chunks held the daemon's stop up (its task group waits for retention)
well past systemd's TimeoutStopSec. The rest is pruned at the next start's first hour."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentd.daemon.retention import retention
from agentd.db import meta
from agentd.db.store import Store


@pytest.mark.timeout(120)
async def test_a_stop_ends_a_long_prune_between_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "agentd.db")
    await store.open()
    stop = asyncio.Event()
    chunks: list[int] = []

    def endless(c: Any, older_than: float) -> int:
        """A backlog that never ends; the daemon is asked to stop at the third chunk."""
        chunks.append(1)
        if len(chunks) == 3:
            stop.set()
        return 500

    monkeypatch.setattr(meta, "prune", endless)
    deps = SimpleNamespace(
        config=SimpleNamespace(daemon=SimpleNamespace(journal_retention_days=30)), store=store
    )
    try:
        await asyncio.wait_for(retention(deps, stop), 60)  # type: ignore[arg-type]
    finally:
        await store.close(5)
    assert len(chunks) == 3
