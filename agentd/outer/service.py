"""The outer loop in the daemon: turn due times into `checkins` rows, then run them.

The truth is in the tables: each goal's next cadence look (`cadences.next_at`) and each schedule's
last durable fire (`schedules.last_fired_at`). A tick compares them with the injected clock's now,
records every due time once (a fire to run, or a missed one with its reason: after an outage the
schedule's misfire policy decides, and nothing is silently dropped), then runs due check-ins —
one at a time per goal, a few goals at once, never inside the goal's quiet hours.

APScheduler only wakes the loop: one job per schedule (its trigger is `schedule.next_fire`, so
DST and jitter follow our rules) and one for the earliest look, all rebuilt from the tables at
start. Jobs run on the wall; under `serve --clock-speed N` their times are scaled, and since the
loop also ticks every poll interval and always compares with the clock, nothing depends on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from agentd.config import AgentConfig
from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.checkins import CheckinStatus
from agentd.deps import Deps
from agentd.errors import StateError
from agentd.models import Goal
from agentd.outer import cadence, checkin, schedule
from agentd.outer.schedule import ScheduleSpec

log = structlog.get_logger("agentd.outer")
Launch = Callable[[int, int], None]

MAX_CONCURRENT_CHECKINS = 4  # goals checked in at once (each holds at most one model call)
GRACE_POLLS = 5  # a fire found within this many poll intervals of its time is on time, not missed
CRASH_PAUSE_S = 30.0  # wall seconds before a check-in that raised unexpectedly is tried again


def spec_of(s: qs.Schedule) -> ScheduleSpec:
    """A schedule row as the time math reads it (ValueError if the row is malformed)."""
    return schedule.parse_spec(
        s.kind, s.spec, s.tz, misfire=s.misfire, misfire_cap=s.misfire_cap,
        max_lateness_s=s.max_lateness_s, jitter_s=s.jitter_s,
    )  # fmt: skip


def when(t: float, tz: str = "UTC") -> str:
    """A time for a reason or a log line: `Tue 2026-03-03 09:00 Europe/Berlin`."""
    return datetime.fromtimestamp(t, schedule.zone(tz)).strftime(f"%a %Y-%m-%d %H:%M {tz}")


@dataclass
class _Scan:
    """What one tick read (one read transaction)."""

    unplanned: list[Goal] = field(default_factory=list)
    schedules: list[qs.Schedule] = field(default_factory=list)
    looks: list[tuple[int, float]] = field(default_factory=list)  # (goal_id, next_at) due
    cadences: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    agents: dict[int, str] = field(default_factory=dict)  # goal_id → agent, for goals in play
    open: list[tuple[int, int]] = field(default_factory=list)  # (checkin_id, goal_id)
    next_wake: float | None = None


class _FireTrigger(BaseTrigger):
    """An APScheduler trigger that asks our schedule math (in clock time) for the next fire."""

    def __init__(self, outer: Outer, spec: ScheduleSpec, goal_id: int, anchor: float) -> None:
        self.outer, self.spec, self.goal_id, self.anchor = outer, spec, goal_id, anchor

    def get_next_fire_time(self, previous_fire_time: Any, now: datetime) -> datetime:
        after = self.outer.clock_time(previous_fire_time or now)
        return self.outer.wall_time(schedule.next_fire(self.spec, after, self.goal_id, self.anchor))


class Outer:
    """The daemon's check-in service: `start`, then `run(stop)` in the root TaskGroup, `stop`."""

    def __init__(self, deps: Deps, launch: Launch) -> None:
        self.deps = deps
        self.launch = launch
        # Simulated seconds per wall second (`serve --clock-speed`); 1 on the wall clock.
        self.rate = float(getattr(deps.clock, "speed", 1.0))
        self.poll_s = deps.config.daemon.poll_interval_s
        self.grace_s = GRACE_POLLS * self.poll_s * self.rate
        self.jobs: AsyncIOScheduler | None = None
        self.tasks: dict[int, asyncio.Task[None]] = {}  # goal_id → its running check-in
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_CHECKINS)
        self._wake = asyncio.Event()
        self._job_specs: dict[str, tuple[Any, ...]] = {}
        self._next_wake: float | None = None
        self._crashed: dict[int, float] = {}  # checkin_id → monotonic time to try again
        self.stopping = False

    # ── time on both sides of APScheduler ─────────────────────────────────────────────────────

    def clock_time(self, wall: datetime) -> float:
        return self.deps.clock.now() + (wall.timestamp() - time.time()) * self.rate

    def wall_time(self, t: float) -> datetime:
        return datetime.fromtimestamp(time.time() + (t - self.deps.clock.now()) / self.rate, UTC)

    # ── lifecycle ─────────────────────────────────────────────────────────────────────────────

    async def start(self) -> None:
        """Catch up on what fell due while the daemon was down (recorded, by each schedule's
        misfire policy), plan new goals, and build the wake-up jobs from the tables."""
        self.jobs = AsyncIOScheduler(
            timezone=UTC,
            jobstores={"default": MemoryJobStore()},
            job_defaults={"coalesce": True, "misfire_grace_time": None, "max_instances": 1},
        )
        self.jobs.start()  # inside the running loop (APScheduler 3 binds to it here)
        await self.tick(starting=True)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.tick()
            except StateError as e:  # a locked or briefly unwritable database: next tick
                log.error("outer.tick_failed", error=str(e))
            self._wake.clear()
            waiter = asyncio.ensure_future(self._wake.wait())
            stopper = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, timeout=self.poll_s, return_when="FIRST_COMPLETED")
            finally:
                waiter.cancel()
                stopper.cancel()

    async def stop(self, grace_s: float = 10.0) -> None:
        """No new check-in; those in flight get `grace_s` (each is resumable from its row)."""
        self.stopping = True
        if self.jobs is not None and self.jobs.running:
            self.jobs.shutdown(wait=False)
        pending = list(self.tasks.values())
        if pending:
            _done, late = await asyncio.wait(pending, timeout=grace_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=5)

    def wake(self) -> None:
        self._wake.set()

    async def _job_wake(self) -> None:  # a coroutine: APScheduler runs it on the loop
        self._wake.set()

    # ── one tick ──────────────────────────────────────────────────────────────────────────────

    async def tick(self, *, starting: bool = False) -> None:
        now = self.deps.clock.now()
        scan = await self.deps.store.read(lambda c: self._scan(c, now))
        if scan.unplanned:
            await self.deps.store.write(lambda c: self._plan(c, scan.unplanned, now))
        if scan.schedules or scan.looks:
            fired = await self.deps.store.write(lambda c: self._fire(c, scan, now, starting))
            if fired:
                scan = await self.deps.store.read(lambda c: self._scan(c, now))
        self._start_checkins(scan, now)
        if self.jobs is not None and not self.stopping:
            await self._sync_jobs(now, scan.next_wake)

    def _enabled_agents(self) -> dict[str, AgentConfig]:
        return {n: a for n, a in self.deps.config.agents.items() if a.checkin.enabled}

    def _scan(self, c: Any, now: float) -> _Scan:
        agents = self._enabled_agents()
        scan = _Scan(next_wake=qs.next_wake(c))
        for goal_id in qs.unplanned_goals(c):
            goal = q.get_goal(c, goal_id)
            if goal.agent in agents:
                scan.unplanned.append(goal)
        scan.schedules = [
            s for s in qs.active(c) if s.next_fire_at is None or s.next_fire_at <= now
        ]
        scan.looks = [(g, t) for g, t in qs.due_looks(c, now) if not _recorded(c, g, t)]
        scan.open = [(i, qc.get(c, i).goal_id) for i in qc.open_ids(c, now)]
        goal_ids = {s.goal_id for s in scan.schedules} | {g for g, _ in scan.looks}
        goal_ids |= {g for _, g in scan.open}
        for goal_id in goal_ids:
            scan.agents[goal_id] = q.get_goal(c, goal_id).agent
            scan.cadences[goal_id] = qc.cadence_row(c, goal_id)
        return scan

    def _cadence(self, scan: _Scan, goal_id: int) -> cadence.Cadence | None:
        agent = self._enabled_agents().get(scan.agents.get(goal_id, ""))
        return None if agent is None else cadence.cadence_from(agent.checkin, scan.cadences[goal_id])

    def _plan(self, c: Any, goals: list[Goal], now: float) -> None:
        """A new goal's first look: soon (at the goal's minimum interval), so a goal that lacks
        something to act on is asked about the same day — clamped and quiet-aware as any look."""
        for goal in goals:
            agent = self.deps.config.agents[goal.agent]
            row = qc.cadence_row(c, goal.goal_id)
            if row is not None and row["next_at"] is not None:
                continue  # planned meanwhile (a check-in ended)
            t, why = checkin.next_look(c, agent, goal, now, agent.checkin.min_s)
            proposed = f"model proposed {cadence.format_duration(agent.checkin.min_s)}"
            why = why.replace(proposed, "first look at a new goal", 1)
            qc.set_next(c, goal.goal_id, t, why, now)
            log.info("checkin.planned", goal_id=goal.goal_id, next_at=when(t), why=why)

    def _fire(self, c: Any, scan: _Scan, now: float, starting: bool) -> int:
        """Record due times as check-in rows (one transaction). Returns how many rows are new."""
        written = 0
        late_runs: set[int] = set()  # goals that got a catch-up from a schedule in this tick
        for sched in scan.schedules:
            if sched.goal_id not in scan.agents or self._cadence(scan, sched.goal_id) is None:
                continue  # check-ins are off for the goal's agent (or it left the config)
            n, late = self._fire_schedule(c, sched, scan, now)
            written += n
            if late:
                late_runs.add(sched.goal_id)
        for goal_id, next_at in scan.looks:
            cad = self._cadence(scan, goal_id)
            if cad is None:
                continue
            written += self._fire_look(c, goal_id, next_at, cad, now, goal_id in late_runs)
        if written and starting:
            log.info("outer.caught_up", rows=written)
        return written

    def _fire_schedule(
        self, c: Any, sched: qs.Schedule, scan: _Scan, now: float
    ) -> tuple[int, bool]:
        try:
            spec = spec_of(sched)
        except ValueError as e:
            log.error("schedule.invalid", schedule_id=sched.schedule_id, error=str(e))
            qs.set_next_fire(c, sched.schedule_id, None)
            return 0, False
        cu = schedule.catch_up(
            spec, sched.last_fired_at, now, sched.goal_id, sched.created_at, grace_s=self.grace_s
        )
        row = scan.cadences.get(sched.goal_id) or {}
        snoozed = float(row.get("snoozed_until") or 0.0)
        run = [t for t in cu.run if t >= snoozed]
        missed = [(t, f"goal snoozed until {when(snoozed, spec.tz)}") for t in cu.run if t < snoozed]
        missed += [(t, _missed_reason(spec, t, cu, now)) for t in cu.skipped]
        if cu.truncated and missed:
            first, reason = missed[0]
            missed[0] = (first, f"{reason}; {cu.skipped_count - len(cu.skipped)} earlier fires "
                                "were missed too (counted, not listed)")  # fmt: skip
        nxt = schedule.next_fire(spec, now, sched.goal_id, sched.created_at)
        new_due, written = qs.record_fires(c, sched, run=run, missed=missed, now=now, next_fire_at=nxt)
        for checkin_id, t in zip(new_due, run, strict=False):
            log.info("checkin.fired", goal_id=sched.goal_id, schedule_id=sched.schedule_id,
                     checkin_id=checkin_id, due_at=when(t, spec.tz), late_s=round(now - t, 1))  # fmt: skip
        if cu.skipped_count or len(missed):
            log.info("checkin.missed", goal_id=sched.goal_id, schedule_id=sched.schedule_id,
                     count=cu.skipped_count + len(missed) - len(cu.skipped),
                     policy=spec.misfire, ran=len(run))  # fmt: skip
        return written, any(now - t > self.grace_s for t in run)

    def _fire_look(
        self, c: Any, goal_id: int, next_at: float, cad: cadence.Cadence, now: float,
        coalesced: bool,
    ) -> int:  # fmt: skip
        """The goal's cadence look is due: record it — unless quiet hours hold now (then the look
        moves to their end, e.g. after a restart at night), or a schedule's catch-up in this
        same tick already looks at the goal (one catch-up per goal per outage)."""
        if cadence.in_quiet(cad, now):
            until = cadence.leave_quiet(cad, now)
            why = f"quiet hours until {datetime.fromtimestamp(until, schedule.zone(cad.tz)):%H:%M}"
            qc.set_next(c, goal_id, until, f"{why}: the look due {when(next_at, cad.tz)} waits", now)
            log.info("checkin.deferred", goal_id=goal_id, until=when(until, cad.tz), why=why)
            return 0
        if coalesced and now - next_at > self.grace_s:
            reason = "coalesced into a schedule's catch-up of the same goal"
            qc.add_due(c, goal_id, next_at, now, None, CheckinStatus.MISSED, reason)
            log.info("checkin.missed", goal_id=goal_id, count=1, reason=reason)
            return 1
        checkin_id = qc.add_due(c, goal_id, next_at, now)
        if checkin_id is None:
            return 0
        log.info("checkin.fired", goal_id=goal_id, checkin_id=checkin_id, due_at=when(next_at),
                 late_s=round(now - next_at, 1), by="cadence")  # fmt: skip
        return 1

    # ── running check-ins ─────────────────────────────────────────────────────────────────────

    def _start_checkins(self, scan: _Scan, now: float) -> None:
        if self.stopping:
            return
        wall = time.monotonic()
        for checkin_id, goal_id in scan.open:
            if goal_id in self.tasks or self._crashed.get(checkin_id, 0.0) > wall:
                continue  # one check-in per goal at a time, in order
            cad = self._cadence(scan, goal_id)
            if cad is not None and cadence.in_quiet(cad, now):
                continue  # never inside quiet hours: it runs when they end
            task = asyncio.create_task(self._run_one(goal_id, checkin_id), name=f"checkin-{checkin_id}")
            self.tasks[goal_id] = task
            task.add_done_callback(lambda _t, g=goal_id: self._ended(g))

    def _ended(self, goal_id: int) -> None:
        self.tasks.pop(goal_id, None)
        if not self.stopping:
            self._wake.set()  # the goal's next check-in (or look) may be due already

    async def _run_one(self, goal_id: int, checkin_id: int) -> None:
        async with self._slots:
            if self.stopping:
                return
            structlog.contextvars.bind_contextvars(goal_id=goal_id, checkin_id=checkin_id)
            try:
                await checkin.run_checkin(self.deps, checkin_id, self.launch)
            except StateError as e:  # the database was briefly unusable: the next tick resumes
                log.warning("checkin.retrying", error=str(e))
            except Exception:
                log.exception("checkin.crashed")
                self._crashed[checkin_id] = time.monotonic() + CRASH_PAUSE_S

    # ── wake-up jobs ──────────────────────────────────────────────────────────────────────────

    async def _sync_jobs(self, now: float, next_wake: float | None) -> None:
        """Keep one APScheduler job per active schedule, and one for the earliest look."""
        assert self.jobs is not None
        schedules = await self.deps.store.read(qs.active)
        wanted: dict[str, tuple[Any, ...]] = {}
        for s in schedules:
            wanted[f"schedule:{s.schedule_id}"] = (s.kind, s.spec, s.tz, s.jitter_s, s.created_at)
        for job_id in set(self._job_specs) - set(wanted):
            with contextlib.suppress(Exception):
                self.jobs.remove_job(job_id)
            del self._job_specs[job_id]
        for s in schedules:
            job_id = f"schedule:{s.schedule_id}"
            if self._job_specs.get(job_id) == wanted[job_id]:
                continue
            try:
                spec = spec_of(s)
            except ValueError:
                continue
            trigger = _FireTrigger(self, spec, s.goal_id, s.created_at)
            # The next run counts from the last durable fire, never from "now": a fire missed
            # while down is the tables' business (recorded at start), not lost here.
            after = max(s.last_fired_at or s.created_at, now)
            first = self.wall_time(schedule.next_fire(spec, after, s.goal_id, s.created_at))
            self.jobs.add_job(self._job_wake, trigger, id=job_id, replace_existing=True,
                              next_run_time=first)  # fmt: skip
            self._job_specs[job_id] = wanted[job_id]
        if next_wake != self._next_wake:
            self._next_wake = next_wake
            if next_wake is not None and next_wake > now:
                self.jobs.add_job(self._job_wake, "date", run_date=self.wall_time(next_wake),
                                  id="outer:next", replace_existing=True)  # fmt: skip


def _recorded(c: Any, goal_id: int, due_at: float) -> bool:
    row = c.execute(
        "SELECT 1 FROM checkins WHERE goal_id = ? AND coalesce(schedule_id, 0) = 0 AND due_at = ?",
        (goal_id, due_at),
    ).fetchone()
    return row is not None


def _missed_reason(spec: ScheduleSpec, t: float, cu: schedule.CatchUp, now: float) -> str:
    late = cadence.format_duration(now - t)
    if t < cu.stale_before:
        limit = cadence.format_duration(spec.max_lateness_s)
        return f"missed ({late} late, past the {limit} max lateness)"
    if spec.misfire == "skip":
        return f"missed ({late} late; misfire = skip)"
    if spec.misfire == "once":
        return f"missed ({late} late; misfire = once: coalesced into the latest)"
    return f"missed ({late} late; misfire = all, beyond the cap of {spec.misfire_cap})"
