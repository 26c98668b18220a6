"""The lease keeper (agentd/daemon/leases.py) on a shared PostgreSQL store, in-process with a real
engine: when its renewals cannot commit in time it fences itself — stops driving the run and takes
no new work — and when a renewal commits again it drives the run again at once, under a new epoch.

The renewals are held off by a row lock on the daemon's own row (another session's `FOR UPDATE`),
which is what a database too busy or cut off looks like from the daemon. And the last check before
a side effect: no action starts once the daemon no longer vouches for its lease."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentd.daemon import serve as daemon
from agentd.daemon.leases import LeaseKeeper
from agentd.db import leases
from agentd.db import queries as q
from agentd.db.postgres.connection import connect
from agentd.db.store import Store
from agentd.models import StepKind, StepStatus
from agentd.runs.engine import Engine, RunDriver
from tests.configs import FINISH, act, append_action, scripted_home

LEASE_S = 2.0


class Holding(RunDriver):
    """A run whose step never ends (a long command): only a cancel stops its task."""

    async def advance(self) -> bool:
        await asyncio.Event().wait()
        return False


async def until(cond: Any, what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.mark.backends("postgres")
async def test_keeper_fences_when_renewals_stall_and_resumes_the_run_after(home: Any) -> None:
    cfg = home.write_config(
        """
        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [agents.default]
        actions = ["finish"]
        """,
        replies=[{"action": {"kind": "finish", "outcome": "succeeded", "summary": "-"}}],
    )
    run_id = home.store.write(
        lambda c: q.create_run(
            c, goal_id=q.add_goal(c, title="t", why="w", agent="default", criteria=[],
                                  deadline=None), agent="default", trigger="hold")
    )  # fmt: skip
    store = Store(home.paths.db, backend=home.backend())
    await store.open()
    deps = daemon.build_deps(cfg, store, "me:1:test")
    deps.lease_s = LEASE_S
    engine = Engine(deps)
    engine.drivers["hold"] = Holding
    keeper = LeaseKeeper(deps, engine, shared=True)
    stop = asyncio.Event()
    blocker = connect(home.store_url)
    try:
        for run, epoch in await keeper.start():
            engine.launch(run, epoch)
        first_epoch = home.run(run_id).lease_epoch
        task = asyncio.create_task(keeper.run(stop))
        await until(lambda: run_id in engine.tasks, "the run driven")

        blocker.execute("BEGIN")  # hold the daemon's row: its renewals wait, then time out
        blocker.execute("SELECT 1 FROM daemons WHERE owner = ? FOR UPDATE", ("me:1:test",))
        await until(lambda: engine.fenced, "the fence")
        assert not deps.claiming
        await until(lambda: run_id not in engine.tasks, "the run's task cancelled")

        blocker.execute("ROLLBACK")
        await until(lambda: not engine.fenced and run_id in engine.tasks, "the resume")
        assert deps.claiming
        assert home.run(run_id).lease_epoch == first_epoch + 1
        held = home.store.read(lambda c: leases.held_run_ids(c, "me:1:test"))
        assert held == [run_id]
        stop.set()
        await asyncio.wait_for(task, 10)
    finally:
        blocker.close()
        await engine.stop(1)
        await store.close()


@pytest.mark.backends("sqlite")
async def test_no_action_starts_once_the_lease_is_not_vouched_for(home: Any, tmp_path: Any) -> None:
    """The last check before a side effect: a daemon thawed past its fence (its keeper has not
    run yet) journals the intent but starts nothing; the next owner recovers it."""
    out = tmp_path / "out.txt"
    cfg = home.write_config(
        scripted_home(("append", "finish"), tables=append_action(out)),
        [act("append", word="x"), FINISH],
    )
    run_id = home.start_run(home.add_goal())
    store = Store(home.paths.db, backend=home.backend())
    await store.open()
    deps = daemon.build_deps(cfg, store, "me:1:test")
    deps.lease_ok = lambda: False
    engine = Engine(deps)
    try:
        epoch = await store.write(lambda c: leases.claim_run(c, run_id, "me:1:test", 30))
        engine.launch(run_id, epoch)
        await until(lambda: not engine.tasks, "the run let go")
    finally:
        await engine.stop(1)
        await store.close()
    acts = [s for s in home.steps(run_id) if s.kind == StepKind.ACT]
    assert [(s.action, s.status) for s in acts] == [("append", StepStatus.STARTED)]
    assert not out.exists()
