"""Planning new goals after READY, and once across daemons (issue 35 item 3: a first start on
PostgreSQL with two daemons at 100,000 goals took 4.6–5.4 s to READY, a 500-goal planning batch
of several statements per goal most of it, and both daemons planned the same batches, the second
waiting on the first's row locks). The daemon's start catches up on what is due and plans
nothing; its loop's first tick plans at once. A daemon whose planning batch another daemon is
planning right then leaves it (no wait, its cursor kept) and finds those goals planned next time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from agentd import config
from agentd.clock import ManualClock
from agentd.daemon import serve as daemon
from agentd.db.store import Store
from agentd.outer.service import Outer
from tests.conftest import Home
from tests.outer.support import write_home

pytestmark = pytest.mark.backends

GOALS = 30


def setup(home: Home) -> None:
    write_home(home)
    for i in range(GOALS):
        home.add_goal(title=f"goal {i}")


def planned(home: Home) -> int:
    sql = "SELECT count(*) FROM cadences WHERE next_at IS NOT NULL"
    return int(home.store.read(lambda c: c.execute(sql).fetchone()[0]))


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.05)


async def test_the_daemon_is_ready_before_planning_and_plans_every_goal_after(
    home: Home,
) -> None:
    setup(home)
    at_ready: list[int] = []
    stop = asyncio.Event()
    task = asyncio.create_task(
        daemon.serve(
            home.paths, config.load(home.paths.config), ready=lambda: at_ready.append(planned(home)),
            stop=stop,
        )
    )  # fmt: skip
    try:
        await until(lambda: bool(at_ready) or task.done(), "READY")
        assert at_ready == [0]  # was a first batch (all 30 here) before READY
        await until(lambda: planned(home) == GOALS, "every goal planned after READY")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


@pytest.fixture
async def outer(home: Home) -> AsyncIterator[Outer]:
    setup(home)
    store = Store(home.paths.db, backend=home.backend())
    await store.open()
    deps = daemon.build_deps(config.load(home.paths.config), store, owner="test:1")
    deps.clock = ManualClock(time.time())
    o = Outer(deps, lambda run_id, epoch: None)
    yield o
    await o.stop(1)
    await store.close()


async def test_a_daemon_leaves_the_batch_another_daemon_is_planning(
    home: Home, outer: Outer, backend: str
) -> None:
    if backend == "sqlite":
        pytest.skip("one daemon per SQLite home: nobody else plans")
    other = home.backend().connect()  # another daemon's writer, in its planning transaction
    other.execute("SET idle_in_transaction_session_timeout = 0")  # idle here: not cut off
    try:
        other.execute("BEGIN")
        assert other.dialect.try_singleton(other, "planning")
        other.execute("COMMIT")  # (a first try inserts the lock's row: then waited for, once)
        other.execute("BEGIN")
        assert other.dialect.try_singleton(other, "planning")
        await outer.start()  # the first batch (all 30) is another daemon's: left to it, unread
        assert planned(home) == 0
        assert outer._plan_cursor == 0 and outer._dirty  # tried again in a poll, not skipped
        mine = home.backend().connect()
        try:
            mine.execute("BEGIN")
            assert not mine.dialect.try_singleton(mine, "planning")  # not waited for
            mine.execute("ROLLBACK")
        finally:
            mine.close()
        other.execute("ROLLBACK")  # that daemon is gone without planning: nothing is lost
        await outer.tick()
        assert planned(home) == GOALS
    finally:
        other.close()
    assert outer._plan_cursor > 0
