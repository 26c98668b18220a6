"""The outer loop in the daemon: turn due times into `checkins` rows, then run them.

The truth is in the tables: each goal's next cadence look (`cadences.next_at`) and each schedule's
last durable fire (`schedules.last_fired_at`). A tick compares them with the injected clock's now,
records every due time once (a fire to run, or a missed one with its reason: after an outage the
schedule's misfire policy decides, and nothing is silently dropped), then runs due check-ins —
one at a time per goal, a few goals at once, never inside the goal's quiet hours.

A tick reads only what is due, through indexes (agentd/db/due.py): at 100,000 goals it costs what
is due, not what exists. New goals are planned in bounded batches behind a cursor on `goal_id`
(the first start plans every goal that way, after READY, logging how far it has got); due fires
and looks are recorded in bounded batches too, and a tick that filled a batch is followed by
another at once. APScheduler only wakes the loop: one job at the earliest due time (a look, a
schedule's next fire as the tables hold it, a retry). Jobs run on the wall; under `serve
--clock-speed N` their times are scaled, and since the loop also ticks every poll interval and
always compares with the clock, nothing depends on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agentd.clock import SystemClock
from agentd.config import AgentConfig
from agentd.db import checkins as qc
from agentd.db import due as qd
from agentd.db import glance
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.errors import StateError
from agentd.outer import cadence, checkin
from agentd.outer.fires import Fires, when
from agentd.runs.deps import Deps

log = structlog.get_logger("agentd.outer")
Launch = Callable[[int, int], None]

MAX_CONCURRENT_CHECKINS = 4  # goals checked in at once (each holds at most one model call)
GRACE_POLLS = 5  # a fire found within this many poll intervals of its time is on time, not missed
CRASH_PAUSE_S = 30.0  # wall seconds before a check-in that raised unexpectedly is tried again
# Another commit (the CLI's, or the engine's own steps) is looked at within this many wall
# seconds; what is due by the clock, and explicit wake-ups, are looked at at once.
COMMIT_SCAN_S = 1.0
PLAN_BATCH = 500  # goals read past the planning cursor per tick (each planned in one write)
FIRE_BATCH = 500  # due schedules, and due looks, recorded per tick


@dataclass
class _Scan:
    """What one tick read (one read transaction)."""

    unplanned: list[int] = field(default_factory=list)  # goals with no next look yet
    off: list[int] = field(default_factory=list)  # the same, their agent's check-ins off
    cursor: int = 0  # the planning cursor once these are planned
    read: int = 0  # goal rows read past the cursor
    full: bool = False  # a batch was full: more is due, tick again at once
    schedules: list[qs.Schedule] = field(default_factory=list)  # due now
    looks: list[tuple[int, float]] = field(default_factory=list)  # (goal_id, next_at) due
    cadences: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    agents: dict[int, str] = field(default_factory=dict)  # goal_id → agent, for goals in play
    open: list[tuple[int, int]] = field(default_factory=list)  # (checkin_id, goal_id)
    next_wake: float | None = None


class Outer:
    """The daemon's check-in service: `start`, then `run(stop)` in the root TaskGroup, `stop`."""

    def __init__(self, deps: Deps, launch: Launch) -> None:
        self.deps = deps
        self.launch = launch
        # Simulated seconds per wall second (`serve --clock-speed`); 1 on the wall clock.
        self.rate = float(getattr(deps.clock, "speed", 1.0))
        self.poll_s = deps.config.daemon.poll_interval_s
        self.fires = Fires(grace_s=GRACE_POLLS * self.poll_s * self.rate)
        self.jobs: AsyncIOScheduler | None = None
        self.tasks: dict[int, asyncio.Task[None]] = {}  # goal_id → its running check-in
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_CHECKINS)
        self._wake = asyncio.Event()
        self._next_wake: float | None = None
        # Planning: goals up to this id were read once; new goals come after it. A full batch,
        # or a batch of due fires, makes the next tick come at once (`_more`).
        self._plan_cursor = 0
        self._plan_read = 0  # goal rows read since the cursor last started over
        self._plan_done = False  # the cursor has reached the last goal
        self._plan_total = 0  # goals there were then
        self._plan_for: object = None  # the config the cursor swept with (a reload sweeps again)
        self._more = False
        self._catching_up = False  # due times found at start, recorded over several ticks
        # A tick reads the tables only when something may have changed: a commit (data_version),
        # a wake-up (a job, a check-in that ended), or the time of the next thing due.
        self._dirty = True
        self._version = -1
        self._seen = -1  # the data_version the last tick read (scanned or not)
        # Set by the daemon when the CLI's pokes arrive (they call `wake`): seconds between looks.
        self.safety_scan_s: float | None = None
        self._due_at: float | None = None
        self._scanned = 0.0  # monotonic time of the last scan
        self._crashed: dict[int, float] = {}  # checkin_id → monotonic time to try again
        self.stopping = False

    # ── time on both sides of APScheduler ─────────────────────────────────────────────────────

    def clock_time(self, wall: datetime) -> float:
        return self.deps.clock.now() + (wall.timestamp() - time.time()) * self.rate

    def wall_time(self, t: float) -> datetime:
        return datetime.fromtimestamp(time.time() + (t - self.deps.clock.now()) / self.rate, UTC)

    # ── lifecycle ─────────────────────────────────────────────────────────────────────────────

    async def start(self, *, plan: bool = True) -> None:
        """Catch up on what fell due while the daemon was down (recorded, by each schedule's
        misfire policy), plan new goals (a batch; none with `plan=False`, the daemon's before
        READY: `run`'s first tick plans at once), and build the wake-up jobs from the tables."""
        self.jobs = AsyncIOScheduler(
            timezone=UTC,
            jobstores={"default": MemoryJobStore()},
            job_defaults={"coalesce": True, "misfire_grace_time": None, "max_instances": 1},
        )
        self.jobs.start()  # inside the running loop (APScheduler 3 binds to it here)
        try:
            owner = self.deps.owner
            # On SQLite this daemon is the only one: an earlier daemon's claims are let go now.
            await self.deps.store.write(lambda c: qc.release_others(c, owner))
            await self.tick(starting=True, plan=plan)
        except StateError as e:  # a locked database: the loop's first tick catches up instead
            log.error("outer.catch_up_failed", error=str(e))
        except Exception:  # a bug in the outer loop must never keep the daemon from serving
            log.exception("outer.catch_up_crashed")
            self._dirty = True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._wake.clear()  # before the tick: a wake-up during it is not lost
            pause = self.poll_s
            try:
                await self.tick()
            except StateError as e:  # a locked or briefly unwritable database: next tick
                quiet = self.deps.store.outage  # said once already (db.unreachable)
                (log.debug if quiet else log.error)("outer.tick_failed", error=str(e))
            except Exception:  # a bug here must not stop the runs the daemon drives
                log.exception("outer.tick_crashed")
                self._dirty, pause = True, max(self.poll_s, 5.0)
            if self._more and pause == self.poll_s:  # a batch was full: the rest at once
                await asyncio.sleep(0)
                continue
            waiter = asyncio.ensure_future(self._wake.wait())
            stopper = asyncio.ensure_future(stop.wait())
            pause = self._pause(pause)
            try:
                await asyncio.wait({waiter, stopper}, timeout=pause, return_when="FIRST_COMPLETED")
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
        self._dirty = True
        self._wake.set()

    def _pause(self, pause: float) -> float:
        """With pokes arriving (`safety_scan_s` set by the daemon: a CLI commit wakes us), sleep
        until the next thing due, a commit's deferred scan, or `safety_scan_s` — not one poll.
        A simulated clock keeps the poll: its due times are not wall seconds."""
        if self.safety_scan_s is None or not isinstance(self.deps.clock, SystemClock):
            return pause
        if self._dirty or self._crashed:
            return pause
        until = self.safety_scan_s
        if self._due_at is not None:
            until = min(until, self._due_at - self.deps.clock.now())
        if self._seen != self._version:  # a commit whose scan waits for COMMIT_SCAN_S
            until = min(until, COMMIT_SCAN_S - (time.monotonic() - self._scanned))
        return max(until, pause)

    async def _job_wake(self) -> None:  # a coroutine: APScheduler runs it on the loop
        self.wake()

    # ── one tick ──────────────────────────────────────────────────────────────────────────────

    async def tick(self, *, starting: bool = False, plan: bool = True) -> None:
        now = self.deps.clock.now()
        version = await self.deps.store.data_version()
        self._seen = version
        committed = version != self._version and time.monotonic() - self._scanned >= COMMIT_SCAN_S
        due = self._due_at is not None and now >= self._due_at
        if not (starting or self._dirty or self._crashed or committed or due or self._more):
            return  # nothing committed, nothing woke us, nothing due yet
        self._dirty, self._version, self._scanned = False, version, time.monotonic()
        if starting:
            self._catching_up = True
        if self._plan_for is not self.deps.config:  # at start, and after a reload: agents whose
            self._plan_for = self.deps.config  # check-ins were off may be on now
            self._plan_cursor = self._plan_read = 0
            self._plan_done = False
            self._plan_total = await self.deps.store.read(qd.goals_total)
        scan = await self.deps.store.read(lambda c: self._scan(c, now, planning=plan))
        more = scan.full
        if plan and (scan.read or scan.unplanned or scan.off or not self._plan_done):
            progress = await self.deps.store.write(lambda c: self._plan(c, scan, now))
            if progress is not None:  # committed: the cursor moves past the goals read
                self._plan_cursor, self._plan_read, self._plan_total, self._plan_done = progress
            elif scan.unplanned:  # another daemon plans them now: again in a poll, not at once
                self._dirty, more = True, FIRE_BATCH in (len(scan.schedules), len(scan.looks))
        if scan.schedules or scan.looks:
            # A fire found late at start was missed while down, unless other daemons share the
            # database: one of them was up, and a fire a moment late is just on time.
            after_down = self._catching_up and not self.deps.store.backend.shared
            fired = await self.deps.store.write(lambda c: self._fire(c, scan, now, after_down))
            if fired:
                scan = await self.deps.store.read(lambda c: self._scan(c, now, planning=False))
        self._more = more or not (plan or self._plan_done)  # planning: at the next tick
        self._catching_up = self._catching_up and more
        self._due_at = scan.next_wake
        await self._start_checkins(scan, now)
        if self.jobs is not None and not self.stopping:
            self._sync_jobs(scan, now)

    def _enabled_agents(self) -> dict[str, AgentConfig]:
        return {n: a for n, a in self.deps.config.agents.items() if a.checkin.enabled}

    def _scan(self, c: Any, now: float, *, planning: bool = True) -> _Scan:
        """What a tick acts on, for goals whose agent has check-ins enabled (due times of the
        others wait, unrecorded, until check-ins are enabled again): only due rows and the next
        batch of goals to plan, each read through an index (agentd/db/due.py)."""
        agents = sorted(self._enabled_agents())
        invalid = sorted(self.fires.invalid)
        scan = _Scan(next_wake=qd.next_wake(c, agents, invalid), cursor=self._plan_cursor)
        if planning:
            found, scan.cursor, scan.read, scan.off = qd.unplanned(
                c, self._plan_cursor, agents, PLAN_BATCH
            )
            scan.unplanned = [g for g, _ in found]
            scan.full = scan.read >= PLAN_BATCH
        for sched, agent in qd.schedules(c, now, agents, invalid, FIRE_BATCH):
            scan.schedules.append(sched)
            scan.agents[sched.goal_id] = agent
        for goal_id, next_at, agent in qd.looks(c, now, agents, FIRE_BATCH):
            scan.looks.append((goal_id, next_at))
            scan.agents[goal_id] = agent
        scan.full = scan.full or FIRE_BATCH in (len(scan.schedules), len(scan.looks))
        scan.open = [(i, qc.get(c, i).goal_id) for i in qc.open_ids(c, now, self.deps.owner)]
        for goal_id in set(scan.agents) | {g for _, g in scan.open}:
            if goal_id not in scan.agents:
                scan.agents[goal_id] = q.get_goal(c, goal_id).agent
            scan.cadences[goal_id] = qc.cadence_row(c, goal_id)
        return scan

    def _cadence(self, scan: _Scan, goal_id: int) -> cadence.Cadence | None:
        agent = self._enabled_agents().get(scan.agents.get(goal_id, ""))
        return (
            None if agent is None else cadence.cadence_from(agent.checkin, scan.cadences[goal_id])
        )

    def _plan(self, c: Any, scan: _Scan, now: float) -> tuple[int, int, int, bool] | None:
        """A new goal's first look: soon (at the goal's minimum interval), so a goal that lacks
        something to act on is asked about the same day — clamped and quiet-aware as any look.
        Returns the planning's progress (cursor, goals read, of how many, done), which the caller
        keeps once this commits — so no goal is skipped — or None when it did not move (also
        while another daemon plans: what it planned is skipped at the next try, not planned
        twice, each daemon waiting on the other's locks). Goals whose agent's check-ins are off
        are parked with that reason (`due.park_off`)."""
        if (scan.unplanned or scan.off) and not c.dialect.try_singleton(c, "planning"):
            return None
        qd.park_off(c, scan.off, now)
        for goal_id in scan.unplanned:
            row = qc.cadence_row(c, goal_id)
            if row is not None and row["next_at"] is not None:
                continue  # planned meanwhile (a check-in ended, another daemon planned it)
            # A goal resumed by an agentd older than migration 12 / 8 (PostgreSQL's is not
            # breaking: one may still run) left its schedules parked: due again.
            qs.unpark(c, goal_id)
            goal = q.get_goal(c, goal_id)
            agent = self.deps.config.agents[goal.agent]
            t, why = checkin.next_look(c, agent, goal, now, agent.checkin.min_s)
            proposed = f"model proposed {cadence.format_duration(agent.checkin.min_s)}"
            why = why.replace(proposed, "first look at a new goal", 1)
            qc.set_next(c, goal.goal_id, t, why, now)
            if len(scan.unplanned) <= 10:  # a burst (a first start) is logged as progress
                log.info("checkin.planned", goal_id=goal.goal_id, next_at=when(t), why=why)
        done = scan.read < PLAN_BATCH
        if scan.read == 0 and self._plan_done:
            return None
        read = self._plan_read + scan.read
        total = max(self._plan_total, read)
        glance.note_planning(c, read, total, done)  # the furthest of the daemons' progress
        if scan.read >= PLAN_BATCH or len(scan.unplanned) > 10:
            log.info("outer.planning", goals_read=read, goals=total, planned=len(scan.unplanned),
                     done=done)  # fmt: skip
        return scan.cursor, read, total, done

    def _fire(self, c: Any, scan: _Scan, now: float, starting: bool) -> int:
        """Record due times as check-in rows (one transaction). Returns how many rows are new.

        One catch-up per goal per outage: once a schedule of the goal ran a late fire in this
        tick, the late fires of its other `once` schedules and its late cadence look are
        recorded as coalesced into it (`all` schedules keep theirs: asked for explicitly)."""
        written = 0
        late_runs: dict[int, int] = {}  # goal_id → the schedule whose catch-up runs
        for sched in scan.schedules:
            row = scan.cadences.get(sched.goal_id)
            n, late = self.fires.record_schedule(
                c, sched, row, now, late_runs.get(sched.goal_id), starting
            )
            written += n
            if late:
                late_runs.setdefault(sched.goal_id, sched.schedule_id)
        for goal_id, next_at in scan.looks:
            cad = self._cadence(scan, goal_id)
            if cad is None:
                continue
            written += self.fires.record_look(c, goal_id, next_at, cad, now, late_runs.get(goal_id))
        if written and starting:
            log.info("outer.caught_up", rows=written)
        return written

    # ── running check-ins ─────────────────────────────────────────────────────────────────────

    async def _start_checkins(self, scan: _Scan, now: float) -> None:
        if self.stopping or not self.deps.claiming:
            return
        wall = time.monotonic()
        still_open = {checkin_id for checkin_id, _ in scan.open}
        self._crashed = {k: t for k, t in self._crashed.items() if k in still_open}
        ready: list[tuple[int, int]] = []
        for checkin_id, goal_id in scan.open:
            if goal_id in self.tasks or self._crashed.get(checkin_id, 0.0) > wall:
                continue  # one check-in per goal at a time, in order
            if any(g == goal_id for _, g in ready):
                continue
            cad = self._cadence(scan, goal_id)
            if cad is not None and cadence.in_quiet(cad, now):
                # Never inside quiet hours: it runs when they end (look again then).
                end = cadence.leave_quiet(cad, now)
                self._due_at = end if self._due_at is None else min(self._due_at, end)
                continue
            ready.append((checkin_id, goal_id))
        if not ready:
            return
        # Claimed before they start (SKIP LOCKED): a check-in another daemon took is its own.
        owner, ids = self.deps.owner, [i for i, _ in ready]
        claimed = set(await self.deps.store.write(lambda c: qc.claim(c, ids, owner, now)))
        if self.stopping:  # stopped while claiming: let them go for another daemon at once
            await self.deps.store.write(lambda c: [qc.release(c, i, owner) for i in claimed])
            return
        for checkin_id, goal_id in ready:
            if checkin_id not in claimed or goal_id in self.tasks:
                continue
            task = asyncio.create_task(
                self._run_one(goal_id, checkin_id), name=f"checkin-{checkin_id}"
            )
            self.tasks[goal_id] = task
            task.add_done_callback(functools.partial(self._ended, goal_id))

    def _ended(self, goal_id: int, _task: object = None) -> None:
        self.tasks.pop(goal_id, None)
        if not self.stopping:
            self.wake()  # the goal's next check-in (or look) may be due already

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

    def _sync_jobs(self, scan: _Scan, now: float) -> None:
        """One APScheduler job, at the earliest due time: the tables hold each schedule's next
        fire (`next_fire_at`), so no job per schedule is kept."""
        assert self.jobs is not None
        next_wake = scan.next_wake
        if next_wake != self._next_wake:
            self._next_wake = next_wake
            if next_wake is not None and next_wake > now:
                with contextlib.suppress(ValueError, OverflowError, OSError):  # years away: poll
                    self.jobs.add_job(self._job_wake, "date", run_date=self.wall_time(next_wake),
                                      id="outer:next", replace_existing=True)  # fmt: skip
