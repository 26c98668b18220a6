"""The daemon side of the outer loop in process, on a manual clock and a real SQLite file: catch-up
after an outage by misfire policy and max lateness, quiet hours at a restart, one catch-up per goal,
snoozes, first looks, DST, and the APScheduler trigger that only wakes the loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agentd.clock import ManualClock
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.store import Store
from agentd.outer import schedule
from agentd.outer.service import Outer
from tests.conftest import Home

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC).timestamp()  # a Monday, 12:00 UTC
HOUR, DAY = 3600.0, 86400.0

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[models.checker]
provider = "scripted"
replies = "checkins.json"
request_log = "checkins.log"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
model = "checker"
quiet = "22:00-08:00"
tz = "UTC"
jitter_s = 0

[agents.off]
actions = ["notify", "finish"]
checkin = { enabled = false }
"""
NOTHING = {"reason": "quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}


class Env:
    def __init__(self, home: Home, outer: Outer, clock: ManualClock) -> None:
        self.home, self.outer, self.clock = home, outer, clock

    def goal(self, agent: str = "default") -> int:
        return int(self.home.store.write(lambda c: q.add_goal(
            c, title="keep the build green", why="releases", agent=agent,
            criteria=["nightly passes"], deadline=None,
        )))  # fmt: skip

    def schedule(self, goal_id: int, kind: str, spec: str, **kw: Any) -> int:
        s = schedule.parse_spec(kind, spec, kw.pop("tz", "UTC"), **kw)
        now = self.clock.now()
        return int(self.home.store.write(lambda c: qs.add(
            c, goal_id, kind=s.kind, spec=s.spec, tz=s.tz, misfire=s.misfire,
            misfire_cap=s.misfire_cap, max_lateness_s=s.max_lateness_s, jitter_s=s.jitter_s,
            now=now, next_fire_at=schedule.next_fire(s, now, goal_id, now),
        )))  # fmt: skip

    def rows(self, goal_id: int | None = None) -> list[qc.Checkin]:
        rows = self.home.store.read(lambda c: qc.list_checkins(c, goal_id, limit=100_000))
        return sorted(rows, key=lambda r: r.due_at)

    def look(self, goal_id: int) -> dict[str, Any]:
        row = self.home.store.read(lambda c: qc.cadence_row(c, goal_id))
        assert row is not None
        return row

    def set_look(self, goal_id: int, at: float) -> None:
        now = self.clock.now()
        self.home.store.write(lambda c: qc.set_next(c, goal_id, at, "test", now))

    async def settle(self) -> None:
        """Tick until no check-in is left to start (each started one run to its end)."""
        for _ in range(50):
            await self.outer.tick()
            if not self.outer.tasks:
                return
            await asyncio.wait(list(self.outer.tasks.values()))
        raise AssertionError("check-ins kept starting")


Make = Callable[..., Any]


@pytest.fixture
async def make(home: Home) -> AsyncIterator[Make]:
    made: list[tuple[Store, Outer]] = []

    async def build(quiet: str = "22:00-08:00") -> Env:
        cfg = home.write_config(CONFIG.replace("22:00-08:00", quiet), [{"action": {"kind": "finish",
                                "outcome": "succeeded", "summary": "ok"}}])  # fmt: skip
        (home.root / "checkins.json").write_text(json.dumps([NOTHING]))
        home.store  # noqa: B018  # migrate before the async store opens
        store = Store(home.paths.db)
        await store.open()
        deps = daemon.build_deps(cfg, store, owner="test:1")
        clock = ManualClock(T0)
        deps.clock = clock
        outer = Outer(deps, lambda run_id, epoch: None)
        made.append((store, outer))
        return Env(home, outer, clock)

    yield build
    for store, outer in made:
        await outer.stop(1)
        await store.close()


def statuses(rows: list[qc.Checkin]) -> list[str]:
    return [str(r.status) for r in rows]


# ── catch-up after an outage ────────────────────────────────────────────────────────────────


async def test_daily_schedule_down_three_days_runs_once_and_records_the_others(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.schedule(goal_id, "cron", "0 9 * * *", max_lateness_s=7 * DAY)
    env.clock.set(T0 + 3 * DAY + HOUR)  # Thursday 13:00: fires Tue, Wed, Thu 09:00 were missed
    await env.outer.start()
    await env.settle()
    rows = [r for r in env.rows(goal_id) if r.schedule_id == 1]
    assert statuses(rows) == ["missed", "missed", "skipped"]  # the latest ran (nothing moved)
    assert all("misfire = once" in (r.reason or "") for r in rows[:2])
    assert datetime.fromtimestamp(rows[-1].due_at, UTC).hour == 9


async def test_all_policy_runs_up_to_the_cap_and_max_lateness_only_records(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.schedule(goal_id, "interval", "3600", misfire="all", misfire_cap=3, max_lateness_s=6 * HOUR)
    env.clock.set(T0 + DAY + 60)
    await env.outer.start()
    rows = [r for r in env.rows(goal_id) if r.schedule_id == 1]
    assert len(rows) == 24  # every hourly fire of the day, recorded once
    ran = [r for r in rows if r.status != "missed"]
    assert [r.due_at for r in ran] == [r.due_at for r in rows[-3:]]
    stale = [r for r in rows if r.due_at < env.clock.now() - 6 * HOUR]
    assert stale and all("max lateness" in (r.reason or "") for r in stale)
    # A second start finds nothing more to record: each fire is recorded once.
    await env.outer.start()
    assert len([r for r in env.rows(goal_id) if r.schedule_id == 1]) == 24


async def test_late_look_is_coalesced_into_a_schedules_catch_up(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.schedule(goal_id, "cron", "0 9 * * *")
    env.set_look(goal_id, T0 + DAY)  # Tuesday 12:00
    env.clock.set(T0 + 2 * DAY + 5 * HOUR)  # Wednesday 17:00
    await env.outer.start()
    rows = env.rows(goal_id)
    ran = [r for r in rows if r.status != "missed"]
    assert len(ran) == 1 and ran[0].schedule_id == 1  # one catch-up for the goal
    look = next(r for r in rows if r.schedule_id is None)
    assert look.status == "missed" and "coalesced into schedule 1" in (look.reason or "")


async def test_snoozed_goal_records_schedule_fires_as_missed(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.schedule(goal_id, "interval", "3600")
    until = T0 + 5 * HOUR
    env.home.store.write(lambda c: qs.set_overrides(c, goal_id, T0, snoozed_until=until))
    await env.outer.start()
    for _ in range(6):
        env.clock.advance(HOUR)
        await env.settle()
    rows = [r for r in env.rows(goal_id) if r.schedule_id == 1]
    assert [r.status == "missed" for r in rows] == [r.due_at < until for r in rows]
    assert all("snoozed until" in (r.reason or "") for r in rows if r.status == "missed")


# ── quiet hours ─────────────────────────────────────────────────────────────────────────────


async def test_restart_inside_quiet_hours_moves_the_due_look_to_their_end(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.set_look(goal_id, T0 + 8 * HOUR)  # Monday 20:00, while the daemon is down
    env.clock.set(T0 + 11 * HOUR)  # restart Monday 23:00: inside quiet hours
    await env.outer.start()
    await env.settle()
    assert env.rows(goal_id) == []
    look = env.look(goal_id)
    assert look["next_at"] == T0 + 20 * HOUR  # Tuesday 08:00
    assert look["next_why"].startswith("quiet hours until 08:00")
    env.clock.set(T0 + 20 * HOUR + 30)
    await env.settle()
    assert statuses(env.rows(goal_id)) == ["skipped"]


async def test_a_fire_inside_quiet_hours_is_recorded_and_runs_when_they_end(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.schedule(goal_id, "cron", "0 23 * * *")
    await env.outer.start()
    env.clock.set(T0 + 11 * HOUR + 1)  # 23:00:01
    await env.settle()
    assert statuses([r for r in env.rows(goal_id) if r.schedule_id == 1]) == ["due"]  # not run
    env.clock.set(T0 + 20 * HOUR + 1)  # 08:00:01
    await env.settle()
    fired = [r for r in env.rows(goal_id) if r.schedule_id == 1]
    assert statuses(fired) == ["skipped"]
    done = fired[0].completed_at
    assert done is not None and datetime.fromtimestamp(done, UTC).hour == 8


# ── planning, agents without check-ins, DST ─────────────────────────────────────────────────


async def test_a_new_goals_first_look_comes_soon_and_outside_quiet_hours(make: Make) -> None:
    env = await make()
    goal_id = env.goal()
    env.clock.set(T0 + 9 * HOUR)  # 21:00: min 4h lands at 01:00, inside quiet hours
    await env.outer.start()
    look = env.look(goal_id)
    assert look["next_at"] == T0 + 20 * HOUR
    assert look["next_why"].startswith("first look at a new goal")


async def test_goals_of_an_agent_with_check_ins_off_get_none(make: Make) -> None:
    env = await make()
    goal_id = env.goal(agent="off")
    env.schedule(goal_id, "interval", "3600")
    env.clock.set(T0 + 5 * HOUR)
    await env.outer.start()
    await env.settle()
    assert env.rows(goal_id) == []
    row = env.home.store.read(lambda c: qc.cadence_row(c, goal_id))
    assert row is not None and row["next_at"] is None  # its row (goal add writes it), no look


async def test_a_cron_fires_once_a_day_at_local_time_across_the_dst_change(make: Make) -> None:
    env = await make("00:00-00:01")
    goal_id = env.goal()
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime(2026, 3, 27, 12, 0, tzinfo=berlin).timestamp()  # DST starts Sunday 29th
    env.clock.set(start)
    env.schedule(goal_id, "cron", "0 9 * * *", tz="Europe/Berlin")
    await env.outer.start()
    for _ in range(4 * 24 * 4):  # four days, a tick every 15 minutes
        env.clock.advance(900)
        await env.settle()
    rows = [r for r in env.rows(goal_id) if r.schedule_id == 1]
    local = [datetime.fromtimestamp(r.due_at, berlin) for r in rows]
    assert [(t.day, t.hour, t.minute) for t in local] == [(d, 9, 0) for d in (28, 29, 30, 31)]
    assert all(r.status == "skipped" for r in rows)
