"""The lease keeper: this daemon's hold on its runs, kept or given up in time (DESIGN §7).

At start it registers the daemon and takes the runs it may (every running run on SQLite, under the
home lock; only runs nobody holds on a shared store). Then, every third of the lease, one statement
renews every lease it holds; on a shared store it also claims runs whose lease lapsed (another
daemon died or froze) and lets go of runs another daemon took over.

Self-fencing: a renewal that committed proves the leases last until at least its *start* plus the
lease (the database stamped them later). If no renewal has succeeded by that instant less a margin
— the database is unreachable, or the daemon was frozen (SIGSTOP, a VM pause) — the daemon stops
driving every run and kills their commands before anyone else can own them: a new owner on another
host cannot reach those processes. It drives runs again once a renewal succeeds. Renewals, claims
and resumes go through a connection of their own on a shared store (`Store.write_apart`): a
writer stuck behind a slow write or a lock does not hold them back, so it cannot fence us.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable

import structlog

from agentd import __version__
from agentd.db import leases
from agentd.db.conn import Conn
from agentd.errors import StateError
from agentd.runs.deps import Deps
from agentd.runs.engine import Engine

log = structlog.get_logger("agentd.leases")
Launch = Callable[[int, int], None]


class LeaseKeeper:
    """Renews this daemon's leases, claims lapsed ones (shared stores) and fences in time."""

    def __init__(self, deps: Deps, engine: Engine, *, shared: bool) -> None:
        self.deps = deps
        self.engine = engine
        self.shared = shared
        self.lease_s = deps.lease_s
        self.interval_s = self.lease_s / 3
        # Fence this long before the lease can expire: time to cancel and kill, and clock rates.
        self.margin_s = self.interval_s / 2
        self._valid_until = 0.0  # monotonic: our leases last at least until then
        self._schema_seen: list[tuple[int, str, bool]] = []
        self._breaking = False  # a newer agentd's breaking schema: claim nothing more
        self.renewals = 0
        self.fences = 0  # times it fenced itself (metrics)
        self.takeovers = 0  # lapsed runs it took over (metrics)
        self._failing = False  # a renewal failed since the last that committed
        deps.lease_ok = self.lease_ok

    def lease_ok(self) -> bool:
        """Whether the leases still hold by our own clock (always, where nobody else could
        take them)."""
        return not self.shared or (not self.engine.fenced and time.monotonic() < self.fence_at)

    @property
    def fence_at(self) -> float:
        """The monotonic instant at which the daemon stops driving its runs unless renewed."""
        return self._valid_until - self.margin_s

    async def start(self) -> list[tuple[int, int]]:
        """Register this daemon and take the runs it may drive now; returns (run_id, epoch)."""
        owner, lease_s, shared = self.deps.owner, self.lease_s, self.shared
        most = self.deps.config.daemon.max_concurrent_runs

        def work(c: Conn) -> list[tuple[int, int]]:
            leases.register(
                c, owner=owner, host=socket.gethostname(), pid=os.getpid(), version=__version__,
                lease_s=lease_s,
            )  # fmt: skip
            if shared:  # no more than it can drive at once
                return leases.claim_free(c, owner, lease_s, lapsed=True, limit=most)
            return leases.claim_running(c, owner, lease_s)

        sent = time.monotonic()
        taken = await self.deps.store.write(work)
        self._valid_until = sent + lease_s
        if shared:
            await self.check_schema()  # a newer compatible schema (a breaking one refused open)
        return taken

    async def run(self, stop: asyncio.Event) -> None:
        if not self.shared:
            # One daemon owns the database (the home lock): nobody can take its runs, so there
            # is nothing to renew, and an idle daemon writes nothing (every commit would also
            # refresh the open web pages).
            await stop.wait()
            return
        next_renewal = time.monotonic() + self.interval_s
        while not stop.is_set():
            wake_at = min(next_renewal, self.fence_at) if self.shared else next_renewal
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, wake_at - time.monotonic()))
            if stop.is_set():
                return
            # First the fence: after a freeze, every deadline passed at once, and the children
            # must die before anything else of ours runs on (the database refuses our writes).
            self._fence_if_due()
            if time.monotonic() >= next_renewal or self.engine.fenced:
                next_renewal = time.monotonic() + self.interval_s
                if await self.renew() and self.shared:
                    await self.check_schema()
                    if self.deps.claiming:
                        await self.claim_lapsed()

    def _fence_if_due(self) -> None:
        if not self.shared or self.engine.fenced or time.monotonic() < self.fence_at:
            return
        self.engine.fenced = True
        self.fences += 1
        self.deps.claiming = False  # no wakes, adoptions or check-ins while we cannot vouch
        stopped = self.engine.let_go()
        log.error(
            "lease.fenced",
            runs=stopped,
            late_s=round(time.monotonic() - self._valid_until, 1),
            note="no lease renewal in time: stopped driving every run and killed their "
            "commands before another daemon may take them; resuming once a renewal succeeds",
        )

    async def renew(self) -> bool:
        """Renew every lease held; let go of runs another daemon took. False if it failed."""
        owner, lease_s = self.deps.owner, self.lease_s
        driving = self.engine.live()

        def work(c: Conn) -> tuple[list[tuple[int, int]], list[int]]:
            held = leases.renew(c, owner, lease_s)
            return held, leases.taken(c, owner, driving)

        sent = time.monotonic()
        try:
            # Never past the fence: a renewal stuck on a dead connection must not hold it off
            # (once fenced, a slow renewal harms nobody: it gets the interval).
            fencing = self.shared and not self.engine.fenced
            budget = max(0.5, self.fence_at - sent) if fencing else self.interval_s
            async with asyncio.timeout(budget):
                # On a connection of its own: a slow batch of the writer cannot fence us.
                held, taken = await self.deps.store.write_apart(work)
        except (StateError, TimeoutError) as e:
            # Said at the first failure; during a database outage (said itself, db/outage.py)
            # not again at every renewal: the fence and db.reachable tell the rest.
            said = self._failing and self.deps.store.outage is not None
            (log.debug if said else log.error)("lease.renew_failed", error=str(e) or "timed out")
            self._failing = True
            self._fence_if_due()
            return False
        self._failing = False
        self._valid_until = sent + lease_s
        self.renewals += 1
        if taken:
            log.warning("lease.lost", runs=self.engine.let_go(set(taken)), note="taken over")
        if self.engine.fenced:
            await self._resume({run_id for run_id, _ in held} - set(taken))
        return True

    async def _resume(self, held: set[int]) -> None:
        """Renewed after a fence: drive again, at once, the runs we still hold (each under a new
        epoch, which refuses any late write of the tasks the fence cancelled)."""
        self.engine.fenced = False
        self.deps.claiming = not self._breaking
        owner, lease_s = self.deps.owner, self.lease_s
        # Every run held: the fence cancelled all their tasks, and one still ending is relaunched
        # when it has ended (Engine.launch queues it).
        orphans = sorted(held)

        def work(c: Conn) -> list[tuple[int, int | None]]:
            return [(r, leases.reclaim(c, r, owner, lease_s)) for r in orphans]

        try:
            relaunched = await self.deps.store.write_apart(work)
        except StateError as e:  # the scheduler's orphan scan takes them later
            log.error("lease.resume_failed", error=str(e))
            relaunched = []
        for run_id, epoch in relaunched:
            if epoch is not None:
                self.engine.launch(run_id, epoch)
        log.warning("lease.resumed", runs=[r for r, e in relaunched if e is not None],
                    note="renewed again: driving the runs still held")  # fmt: skip

    async def check_schema(self) -> None:
        """A newer agentd sharing the database may have migrated it: a compatible migration is
        only logged; a breaking one stops this daemon claiming (it would misread the rows)."""
        backend = self.deps.store.backend
        try:
            newer = await self.deps.store.read(backend.newer_schema)
        except StateError as e:
            log.error("daemon.schema_check_failed", error=str(e))
            return
        if newer == self._schema_seen:
            return
        self._schema_seen = newer
        breaking = [f"{v}: {name}" for v, name, brk in newer if brk]
        self._breaking = bool(breaking)
        if breaking:
            self.deps.claiming = False
            await self._hand_back()
            log.critical(
                "daemon.schema_breaking", migrations=breaking, known=backend.latest,
                note="a newer agentd applied a breaking migration: this daemon hands its runs to "
                "the others and takes no new work; upgrade agentd on this host and restart it",
            )  # fmt: skip
        elif newer:
            log.warning(
                "daemon.schema_newer", migrations=[f"{v}: {name}" for v, name, _ in newer],
                note="compatible: this daemon goes on; upgrade it when you can",
            )  # fmt: skip

    async def _hand_back(self) -> None:
        """Under a breaking schema: stop driving every run and hand them to the daemons that can
        read it (they take them at their next claim). Check-ins and messages in flight here end
        under their claims: released now, another daemon could send one twice."""
        stopped = self.engine.let_go()
        owner = self.deps.owner
        try:
            released = await self.deps.store.write(lambda c: leases.release_runs(c, owner))
        except StateError as e:  # the leases lapse by themselves then
            log.error("lease.release_failed", error=str(e))
            return
        log.warning("lease.handed_back", runs=stopped, released=released)

    async def claim_lapsed(self) -> None:
        """Take runs whose lease lapsed (their daemon died or froze) and drive them; free the
        check-ins and messages such daemons had claimed."""
        if self.engine.stopping:  # draining: what we took now would wait for our stop
            return
        owner, lease_s = self.deps.owner, self.lease_s
        async with self.deps.claims:  # the scheduler's adoption claims from the same slots
            # No more than we can drive at once: the rest is for other daemons' next claim.
            free = max(0, self.deps.config.daemon.max_concurrent_runs - len(self.engine.live()))

            def work(c: Conn) -> tuple[list[tuple[int, int]], int]:
                taken = (
                    leases.claim_free(c, owner, lease_s, lapsed=True, limit=free) if free else []
                )
                return taken, leases.free_claims_of_the_gone(c)

            try:
                taken, freed = await self.deps.store.write_apart(work)
            except StateError as e:
                log.error("lease.claim_failed", error=str(e))
                return
            self.takeovers += len(taken)
            for run_id, epoch in taken:
                log.warning("run.taken_over", run_id=run_id, epoch=epoch)
                self.engine.launch(run_id, epoch)
        if freed:
            log.warning(
                "lease.claims_freed", rows=freed, note="check-ins or messages of a gone daemon"
            )

    async def stop(self) -> None:
        """Record a clean stop; on a shared store hand the runs still held back at once."""
        owner, shared = self.deps.owner, self.shared
        try:
            released = await self.deps.store.write(
                lambda c: leases.stopped(c, owner, release=shared)
            )
        except StateError as e:
            log.error("lease.release_failed", error=str(e))
            return
        if released:
            log.info("lease.released", runs=released)
