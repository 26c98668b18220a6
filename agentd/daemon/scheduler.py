"""The scheduler: turns committed rows into wake-ups — answers, events, due timers, expiries —
and watched states into runs.

It polls `PRAGMA data_version` (cheap) so a CLI commit is noticed within `poll_interval_s`;
timers and expiries are checked every tick. With the control API up (`safety_scan_s` set), every
commit of another process pokes the daemon (agentd/db/poke.py), so the scan becomes a slow safety
net: the loop sleeps until a poke, a nudge, the next timer or expiry, or `safety_scan_s`. On
PostgreSQL with the LISTEN connection up (`listening`), commits arrive as NOTIFY nudges and the
change poll is not read at all (on PostgreSQL it moves at any write of the cluster — a lease
renewal — so it would rescan at every look) and the loop sleeps up to FULL_SCAN_S; when the
listener is lost, both come back.
It only writes rows (a WAKE step, a new run) and hands runs to the engine through `launch`;
it never runs a model loop itself.

Watching is level-triggered (agentd/daemon/watching.py): an active goal whose state trigger
holds gets a run — at every poll, and when a goal appears or becomes active (noticed through
`data_version`) — once per episode, so a run that ended while the service stays down is not
started again at the next poll.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agentd.clock import SystemClock
from agentd.daemon import waking, watching
from agentd.db import due as qd
from agentd.db import items as qi
from agentd.db import leases, meta, stamp
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import waits as qw
from agentd.errors import Refused, StateError
from agentd.models import JSON, InboxItem, InboxKind, InboxStatus
from agentd.runs.deps import Deps
from agentd.sources import observe_all

log = structlog.get_logger("agentd.scheduler")
Launch = Callable[[int, int], None]
# An answer's resolved_at is stamped before its transaction commits; the margin covers that gap.
RESOLVE_MARGIN_S = 10.0
SHARED_RESOLVE_MARGIN_S = 120.0  # answers from other hosts, whose clocks may be a little off
FULL_SCAN_S = 60.0
ALL_RUNS = 1_000_000  # a claim's limit where one daemon owns the database
MAX_REMINDERS = 3  # `on_expire = "remind"`: then the item expires like `deny`


class Scheduler:
    def __init__(
        self, deps: Deps, launch: Launch, live: Callable[[], set[int]] = lambda: set()
    ) -> None:
        self.deps = deps
        self.launch = launch
        self.live = live  # runs the engine drives now: the others `running` are orphans
        self._orphans: set[int] = set()
        self._seen_version = -1
        self._nudged = asyncio.Event()
        self._resolved_cursor = 0.0
        self._last_full_scan = 0.0
        self.ticks = 0
        # Set by the daemon when pokes arrive (the API's socket is up): seconds between scans.
        self.safety_scan_s: float | None = None
        # Set by the daemon with a LISTEN connection (PostgreSQL): True while it is up.
        self.listening: Callable[[], bool] = lambda: False
        # Agents polled by this process: only their snapshots are fresh enough to start runs on
        # (at start, the last snapshot may be from before a long stop).
        self._polled: set[str] = set()
        self._pollers: AsyncIOScheduler | None = None
        self._pollers_for: object = None  # the config the poll jobs were made from

    def nudge(self) -> None:
        """Something was committed that may need matching now (a run started waiting)."""
        self._nudged.set()

    async def run(self, stop: asyncio.Event) -> None:
        interval = self.deps.config.daemon.poll_interval_s
        self._pollers = AsyncIOScheduler(timezone="UTC")
        self._sync_pollers()
        self._pollers.start()
        try:
            await self._loop(stop, interval)
        finally:
            self._pollers.shutdown(wait=False)
            self._pollers = None

    def _sync_pollers(self) -> None:
        """One APScheduler interval job per watching agent, rebuilt when the config is reloaded.
        Missed looks are not caught up (coalesce): a poll is a fresh look, not a debt."""
        if self._pollers is None or self._pollers_for is self.deps.config:
            return
        self._pollers_for = self.deps.config
        self._pollers.remove_all_jobs()
        for name, agent in self.deps.config.agents.items():
            if agent.watch is None:
                continue
            self._pollers.add_job(
                self.poll, "interval", seconds=agent.watch.interval_s, args=[name],
                id=f"poll:{name}", coalesce=True, max_instances=1, misfire_grace_time=None,
                next_run_time=datetime.now(UTC),
            )  # fmt: skip

    async def poll(self, agent: str) -> None:
        """Look at an agent's world between runs; a change of state becomes an event, a health
        flip wakes the agent's runs that sleep or wait for an approval (withdrawing the
        approval), and goals whose state trigger now holds get their run (one per episode)."""
        try:
            cfg = self.deps.config.agents.get(agent)
            if cfg is None or cfg.watch is None:
                return  # a reload removed it; its job goes at the next tick
            raw = await observe_all([self.deps.sources[n] for n in cfg.sources])
            wake = cfg.watch.wake_runs
            owner, lease_s = self.deps.owner, self.deps.lease_s
            now = self.deps.clock.now()
            fresh = self._polled | {agent}
            plan = watching.state_triggers(self.deps.config)  # per poll: a reloaded config applies

            claiming = self.deps.claiming  # fenced or outdated: record the world, start nothing

            def work(c: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
                woken = watching.record_poll(
                    c, agent, raw, owner, now, wake_runs=wake and claiming, lease_s=lease_s
                )
                if not claiming:
                    return woken, []
                watching.episodes(c)
                due = watching.due(c, plan, fresh)
                return woken, watching.start_due(c, due, owner, lease_s)

            woken, started = await self.deps.store.write(work)
            self._polled.add(agent)
        except Exception:
            log.exception("poll.failed", agent=agent)
            return
        for run_id, epoch in woken:
            log.info("run.woken", run_id=run_id, by="world")
            self.launch(run_id, epoch)
        self._launch_started(started)
        self.nudge()

    async def _loop(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            pause = interval
            try:
                await self.tick()
                pause = await self._pause(interval)
            except (StateError, Refused) as e:  # a locked database, a lost race: next tick
                # An outage was said once (db.unreachable): not again at every tick.
                (log.debug if self.deps.store.outage else log.error)(
                    "scheduler.tick_failed", error=str(e)
                )
            waiter = asyncio.ensure_future(self._nudged.wait())
            stopper = asyncio.ensure_future(stop.wait())
            slept = time.monotonic()
            try:
                # A long listening pause is slept in safety_scan_s steps: a lost listener brings
                # the change poll back within one, not at the end of FULL_SCAN_S.
                done: set[Any] = set()
                while (left := slept + pause - time.monotonic()) > 0:
                    step = min(left, self.safety_scan_s or left) if self.listening() else left
                    done, _ = await asyncio.wait(
                        {waiter, stopper}, timeout=step, return_when="FIRST_COMPLETED"
                    )
                    if done or not self.listening():
                        break
                if not done and (late := time.monotonic() - slept - pause) >= 0:
                    self.deps.meter.tick_lag(late)  # woke by the timer: how late this tick is
            finally:
                waiter.cancel()
                stopper.cancel()

    async def _pause(self, interval: float) -> float:
        """How long to sleep before the next tick: `interval`, or with pokes arriving until the
        next timer or expiry (at most `safety_scan_s`). A simulated clock keeps the fast pace:
        its due times are not wall seconds."""
        if self.safety_scan_s is None or not isinstance(self.deps.clock, SystemClock):
            return interval
        due = await self.deps.store.read(lambda c: (qw.next_timer(c), qi.next_expiry(c)))
        # NOTIFY up: commits nudge, so the safety net is the paced full scan's.
        pause = FULL_SCAN_S if self.listening() else self.safety_scan_s
        for at in due:
            if at is not None:
                pause = min(pause, at - self.deps.clock.now())
        return max(pause, interval)

    async def tick(self, force: bool = False) -> None:
        self.ticks += 1
        if not self.deps.claiming:  # a newer agentd's breaking schema: no new work here
            return
        self._sync_pollers()
        nudged = self._nudged.is_set()
        self._nudged.clear()
        # With NOTIFY up, commits come as nudges: no change poll (the paced full scan stays).
        version = self._seen_version if self.listening() else await self.deps.store.data_version()
        now = self.deps.clock.now()  # timers and expiries are on the injected clock
        # Expire first: an item past its time is closed before anything wakes on it (at start,
        # an approval given while the daemon was down is checked against its expiry first).
        # What it closed is matched in this tick: `version` was read before these commits, and
        # no poke follows our own writes, so waiting for a change would wait for the safety net.
        expired = await self._expire(now)
        # The safety-net scan is paced on the wall: it is about the database, not about time.
        full = force or time.monotonic() - self._last_full_scan >= FULL_SCAN_S
        if full or nudged or expired or version != self._seen_version:
            self._seen_version = version
            if full:
                self._last_full_scan = time.monotonic()
            await self._adopt_new_runs()
            if full:
                await self._readopt_orphans()
            await self._wake_answered(full)
            await self._wake_on_events()
            await self._start_triggered()
            await self._start_on_states()
        await self._wake_timers(self.deps.clock.now())

    async def _wake(
        self,
        run_id: int,
        why: JSON,
        wait: JSON,
        skip_locked: bool = False,
        due: float | None = None,
    ) -> None:
        """Wake a run — only if it still waits for `wait` (what was matched, maybe a tick ago),
        and for what `why` names (transitions.wake puts that in the write)."""
        owner, lease_s = self.deps.owner, self.deps.lease_s
        epoch = await self.deps.store.write(
            lambda c: qt.wake(
                c, run_id, owner, why, lease_s, expect=wait, skip_locked=skip_locked, due=due
            )
        )
        self._woken(run_id, why, epoch)

    def _woken(self, run_id: int, why: JSON, epoch: int | None) -> None:
        if epoch is not None:
            log.info("run.woken", run_id=run_id, by=why.get("woke_by"), why=why.get("why"))
            self.launch(run_id, epoch)

    async def _readopt_orphans(self) -> None:
        """Runs whose lease we hold with no task driving them (a load failed, the database
        stayed locked past the retries, the daemon fenced itself and recovered) are taken again.
        Only those orphaned at two full scans in a row: a run between its commit and its launch
        is never snatched. Another daemon's runs are never ours to take here: a lapsed lease is
        claimed by the lease keeper (daemon/leases.py)."""
        owner = self.deps.owner
        running = await self.deps.store.read(lambda c: leases.held_run_ids(c, owner))
        orphans = set(running) - self.live()
        again, self._orphans = orphans & self._orphans, orphans
        for run_id in sorted(again):
            epoch = await self.deps.store.write(
                functools.partial(
                    leases.reclaim, run_id=run_id, owner=owner, lease_s=self.deps.lease_s
                )
            )
            if epoch is None:
                continue  # finished, cancelled or taken over since the scan
            log.warning("run.readopted", run_id=run_id)
            self.launch(run_id, epoch)

    async def _adopt_new_runs(self) -> None:
        """Runs started from the CLI (`agentd run start`) are rows with no owner: take them
        (SKIP LOCKED: two daemons never take the same one)."""
        owner, lease_s = self.deps.owner, self.deps.lease_s
        async with self.deps.claims:  # the lease keeper claims from the same slots
            free = ALL_RUNS  # the one daemon takes them all: they queue for its slots
            if self.deps.store.backend.shared:  # no more than we can drive: the rest is for others
                free = self.deps.config.daemon.max_concurrent_runs - len(self.live())
                if free <= 0:
                    return
            for run_id, epoch in await self.deps.store.write(
                lambda c: leases.claim_free(c, owner, lease_s, lapsed=False, limit=free)
            ):
                self.launch(run_id, epoch)

    async def _wake_answered(self, full: bool) -> None:
        """Wake runs whose inbox item was resolved. Normally only items resolved recently are
        looked at (indexed); a full scan runs at start and every FULL_SCAN_S as a safety net."""
        since = 0.0 if full else self._resolved_cursor

        # Several hosts stamp resolved_at on their own clocks: allow for their skew.
        margin = SHARED_RESOLVE_MARGIN_S if self.deps.store.backend.shared else RESOLVE_MARGIN_S

        def look(c: Any) -> tuple[float, list[tuple[int, int]]]:
            # resolved_at is on the home's clock (db/stamp.py): the margin is wall seconds
            cursor = stamp.at(c, stamp.wall() - margin)
            return cursor, qw.runs_with_resolved_items(c, since)

        self._resolved_cursor, pairs = await self.deps.store.read(look)
        owner, lease_s = self.deps.owner, self.deps.lease_s

        def wake(c: Any, run_id: int, item_id: int) -> tuple[JSON, int | None]:
            # The wait and the answer are read in the waking transaction, never from the scan:
            # by now the run may have been woken (by another daemon, or by a write whose commit
            # this daemon saw fail) and be waiting for a newer item.
            wait = q.get_run(c, run_id).wait or {}
            item = qi.get_item(c, item_id)
            why = waking.inbox_wake(wait, item)
            if wait.get("item_id") != item_id or item.status == InboxStatus.OPEN:
                return why, None
            return why, qt.wake(c, run_id, owner, why, lease_s, expect=wait)

        for run_id, item_id in pairs:
            why, epoch = await self.deps.store.write(
                functools.partial(wake, run_id=run_id, item_id=item_id)
            )
            self._woken(run_id, why, epoch)

    async def _wake_on_events(self) -> None:
        woken: set[int] = set()
        for run_id, wait, event_id, name, data in await self.deps.store.read(
            qw.runs_waiting_on_events
        ):
            if run_id in woken or not waking.matches(wait.get("match", {}), data):
                continue
            woken.add(run_id)
            why = {
                "woke_by": "event",
                "why": wait.get("why"),
                "event_id": event_id,
                "event": name,
                "data": data,
            }
            await self._wake(run_id, why, wait)

    async def _wake_timers(self, now: float) -> None:
        due = await self.deps.store.read(lambda c: qw.due_timers(c, now))
        if not due:
            return
        waits = await self.deps.store.read(lambda c: [q.get_run(c, r).wait or {} for r in due])
        for run_id, wait in zip(due, waits, strict=True):
            why: JSON = {"woke_by": "timer", "why": wait.get("why")}
            if wait.get("kind") == "event":
                why["timed_out"] = f"no {wait.get('event')} event within {wait.get('timeout_s')}s"
            # Daemons sharing the database all see a due timer: SKIP LOCKED, one wakes it and
            # the others move on (a timer still due is seen again at the next tick).
            await self._wake(run_id, why, wait, skip_locked=True, due=now)

    async def _start_on_states(self) -> None:
        """A goal added or resumed while its trigger already holds gets its run now, not at the
        next change. Read first: this runs on most ticks, and rarely finds anything."""
        plan = watching.state_triggers(self.deps.config)
        if not plan or not self._polled:
            return
        fresh = set(self._polled)
        if not await self.deps.store.read(lambda c: watching.due(c, plan, fresh)):
            return
        owner, lease_s = self.deps.owner, self.deps.lease_s

        def work(c: Any) -> list[tuple[int, int]]:
            watching.episodes(c)
            return watching.start_due(c, watching.due(c, plan, fresh), owner, lease_s)

        self._launch_started(await self.deps.store.write(work))

    def _launch_started(self, started: list[tuple[int, int]]) -> None:
        for run_id, epoch in started:
            log.info("run.triggered", run_id=run_id, by="state")
            self.launch(run_id, epoch)

    async def _start_triggered(self) -> None:
        agents = {
            name: set(a.triggers) for name, a in self.deps.config.agents.items() if a.triggers
        }
        owner, lease_s = self.deps.owner, self.deps.lease_s

        def work(c: Any) -> list[tuple[int, int]]:
            # One daemon at a time reads and moves the cursor: two would start the same runs.
            c.dialect.singleton(c, "trigger_cursor")
            cursor = int(meta.get_meta(c, "trigger_cursor", "0"))
            if not agents:
                # The cursor moves on even with no trigger listening, so triggers added later
                # start from the events after that, not from months of history.
                latest = qi.last_event_id(c)
                if cursor != latest:
                    meta.set_meta(c, "trigger_cursor", str(latest))
                return []
            events = qi.events_after(c, cursor)
            started: list[tuple[int, int]] = []
            for event in events:
                if (event.dedupe_key or "").startswith("poll:"):
                    continue  # a watched state: `watching.start_due` starts its runs, once per episode
                listening = [name for name, names in agents.items() if event.name in names]
                if not listening:
                    continue
                for goal_id, agent in qd.active_goals_of(c, listening):  # (agent, status) index
                    if q.active_run_of_goal(c, goal_id) is not None:
                        continue
                    run_id = q.create_run(
                        c,
                        goal_id=goal_id,
                        agent=agent,
                        trigger=f"event:{event.name}",
                        data={"event_id": event.event_id, "event": event.name, "data": event.data},
                    )
                    started.append((run_id, leases.claim_run(c, run_id, owner, lease_s)))
            if events:
                meta.set_meta(c, "trigger_cursor", str(events[-1].event_id))
            return started

        for run_id, epoch in await self.deps.store.write(work):
            log.info("run.triggered", run_id=run_id)
            self.launch(run_id, epoch)

    async def _expire(self, now: float) -> bool:
        """Close (or remind about) the open items due; True when any was closed."""
        items = await self.deps.store.read(lambda c: qi.due_for_expiry(c, now))
        closed = False
        for item in items:
            one = functools.partial(self._expire_one, item=item, now=now)
            closed = await self.deps.store.write(one) or closed
        return closed

    def _expire_one(self, c: Any, *, item: InboxItem, now: float) -> bool:
        # Re-read inside the transaction, one daemon at a time: the operator may have answered
        # since the scan, or another daemon expired it.
        item = qi.expiring(c, item.item_id)
        if item.status != InboxStatus.OPEN or item.expires_at is None:
            return False
        if item.expires_at.timestamp() > now:
            return False  # pushed back meanwhile (a reminder, perhaps another daemon's)
        rule = None
        if item.run_id is not None:
            agent = self.deps.config.agents.get(q.get_run(c, item.run_id).agent)
            rule = agent.policy.expire.get(item.kind.value) if agent else None  # type: ignore[call-overload]
        reminders = int(item.data.get("reminders", 0)) + 1
        if rule is not None and rule.on_expire == "remind" and reminders <= MAX_REMINDERS:
            qi.push_expiry(c, item.item_id, now + rule.after_s, reminders)
            qi.post(
                c,
                InboxKind.NOTICE,
                title=f"reminder: inbox item {item.item_id} still waits",
                body=f"{item.kind} {item.item_id}: {item.title}",
                goal_id=item.goal_id,
                run_id=item.run_id,
                data={"reminds": item.item_id},
            )
            return False  # still open: nothing wakes on it yet
        # An expired approval is a denial, never an execution; reminders end after a few.
        qi.resolve(c, item.item_id, InboxStatus.EXPIRED, answer="expired: no answer in time")
        return True
