"""An idle daemon on PostgreSQL does not poll for changes while its LISTEN connection is up (issue
35: idle CPU): other processes' commits arrive as notifications, so the scheduler's `data_version`
read is skipped; when the listener is lost, the poll resumes at the next tick. A real PostgreSQL
server, a real listener, the scheduler's own loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from agentd import config
from agentd.daemon.scheduler import Scheduler
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store, SyncStore
from agentd.runs.deps import Deps

CONFIG = """
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "template"

[agents.a]
actions = ["finish"]
"""


async def until(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("safety_scan_s", [None, 0.2], ids=["polling", "poked"])
async def test_no_change_poll_while_listening_and_polling_again_when_the_listener_is_lost(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, safety_scan_s: float | None
) -> None:
    """`poked`: the API is up, so a listening loop sleeps up to FULL_SCAN_S (60 s): a lost
    listener still brings the poll back within a `safety_scan_s` step, well before that."""
    (tmp_path / "config.toml").write_text(CONFIG)
    backend = PostgresBackend(pg_url, tmp_path)
    store = Store(tmp_path / "agentd.db", backend=backend)
    await store.open()
    cli = SyncStore(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    deps = Deps(config=config.load(tmp_path / "config.toml"), store=store, models={},
                executors={}, sources={}, owner="me")  # fmt: skip
    scheduler = Scheduler(deps, lambda r, e: None)
    scheduler.safety_scan_s = safety_scan_s
    polls = 0
    read_version = store.data_version

    async def counted() -> int:
        nonlocal polls
        polls += 1
        return await read_version()

    monkeypatch.setattr(store, "data_version", counted)
    scans = 0
    adopt = scheduler._adopt_new_runs

    async def scan() -> None:  # the change-driven scan's first look
        nonlocal scans
        scans += 1
        await adopt()

    monkeypatch.setattr(scheduler, "_adopt_new_runs", scan)
    loop = asyncio.get_running_loop()
    listener = backend.listener(lambda: loop.call_soon_threadsafe(scheduler.nudge), None)
    scheduler.listening = listener.connected.is_set  # as agentd/daemon/serve.py wires it
    stop = asyncio.Event()
    running = asyncio.create_task(scheduler.run(stop))
    try:
        await until("the listener connects", listener.connected.is_set)
        await until("the look after connecting", lambda: scans >= 2)
        before, ticks = polls, scheduler.ticks
        if safety_scan_s is None:  # ticks every poll_interval_s
            await until("twenty idle ticks", lambda: scheduler.ticks >= ticks + 20)
            assert polls == before, "the change poll ran while the listener was up"
        # A CLI commit is still noticed: its notification nudges the scheduler into a scan.
        seen = scans
        cli.write(lambda c: None)
        await until("the commit's scan", lambda: scans > seen and scheduler.ticks > ticks)
        assert polls == before, "the change poll ran while the listener was up"
        # The listener lost: the poll resumes.
        await asyncio.to_thread(listener.stop)
        assert not listener.connected.is_set()
        await until("polling again", lambda: polls >= before + 3)
    finally:
        stop.set()
        await running
        listener.stop()
        await store.close()
        cli.close()
