"""What the outer loop's tests set up alike: a home whose default agent's check-ins are on (a
scripted checker, no jitter, an hour at least), the outer loop built on it on a manual clock,
its store traced, ticks run, and a goal's schedule."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agentd.clock import ManualClock
from agentd.daemon import serve as daemon
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.store import Store
from agentd.outer import schedule
from agentd.outer.service import Outer
from tests.conftest import Home

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC).timestamp()  # a Monday, 12:00 UTC
HOUR = 3600.0
CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[models.checker]
provider = "scripted"
replies = "checkins.json"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
model = "checker"
tz = "UTC"
jitter_s = 0
min_s = 3600
"""
NOTHING = {"reason": "quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}
FINISH = {"action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
SPEC = schedule.parse_spec("interval", "7200", "UTC")  # every two hours


class Traced:
    """The daemon's store, each read and write traced: the statements run, and SQLite's virtual
    machine steps (a progress handler every 100 instructions) — the work a query does, rows
    read included, whatever the machine's speed."""

    def __init__(self, store: Store) -> None:
        self.store, self.sql, self.steps = store, list[str](), 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _wrap(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def traced(c: sqlite3.Connection) -> Any:
            def step() -> int:
                self.steps += 1
                return 0

            c.set_trace_callback(self.sql.append)
            c.set_progress_handler(step, 100)
            try:
                return fn(c)
            finally:
                c.set_trace_callback(None)
                c.set_progress_handler(None, 0)

        return traced

    async def read(self, fn: Callable[[Any], Any]) -> Any:
        return await self.store.read(self._wrap(fn))

    async def write(self, fn: Callable[[Any], Any]) -> Any:
        return await self.store.write(self._wrap(fn))


def write_home(
    home: Home, config: str = CONFIG, replies: list[Any] | None = None, looks: int = 1
) -> Any:
    """The home's config and scripted replies, `looks` quiet check-ins; the config loaded."""
    cfg = home.write_config(config, [FINISH] if replies is None else replies)
    (home.root / "checkins.json").write_text(json.dumps([NOTHING] * looks))
    return cfg


class Outers:
    """Outer loops built on `home`, each on its own store; `close` stops them all."""

    def __init__(self, home: Home) -> None:
        self.home, self.made = home, list[tuple[Store, Outer]]()

    async def build(
        self,
        config: str = CONFIG,
        replies: list[Any] | None = None,
        *,
        looks: int = 50,
        backend: bool = True,
        traced: bool = False,
    ) -> Outer:
        cfg = write_home(self.home, config, replies, looks)
        self.home.store  # noqa: B018  # migrate before the async store opens
        store = (Store(self.home.paths.db, backend=self.home.backend()) if backend
                 else Store(self.home.paths.db))  # fmt: skip
        await store.open()
        deps = daemon.build_deps(cfg, store, owner="test:1")
        deps.clock = ManualClock(T0)
        if traced:
            deps.store = Traced(store)  # type: ignore[assignment]
        self.made.append((store, Outer(deps, lambda run_id, epoch: None)))
        return self.made[-1][1]

    async def close(self) -> None:
        for store, o in self.made:
            await o.stop(1)
            await store.close()


async def ticks(o: Outer, n: int = 1) -> None:
    for _ in range(n):
        o.wake()
        await o.tick()


async def steps_of_a_tick(o: Outer, traced: Any, after: int = 10) -> int:
    """The steps of one tick, once `after` ticks have passed the planning cursor over new ids."""
    await ticks(o, after)
    traced.steps = 0
    await ticks(o)
    return int(traced.steps)


def add(c: Any, title: str, agent: str = "default") -> int:
    return q.add_goal(c, title=title, why="tests", agent=agent, criteria=[], deadline=None)


def scheduled(c: Any, goal_id: int, next_fire_at: float) -> int:
    return qs.add(c, goal_id, kind=SPEC.kind, spec=SPEC.spec, tz="UTC", misfire="once",
                  misfire_cap=SPEC.misfire_cap, max_lateness_s=SPEC.max_lateness_s, jitter_s=0,
                  now=T0 - 4 * HOUR, next_fire_at=next_fire_at)  # fmt: skip


def paused_with_a_schedule(home: Home) -> tuple[int, int]:
    """A paused goal and its schedule, whose fire was due two hours before T0."""
    from agentd.models import GoalStatus

    home.root.mkdir(parents=True, exist_ok=True)
    goal = home.store.write(lambda c: add(c, "backups"))
    sched = home.store.write(lambda c: scheduled(c, goal, T0 - 2 * HOUR))
    home.store.write(lambda c: q.set_goal_status(c, goal, GoalStatus.PAUSED))
    return goal, sched
