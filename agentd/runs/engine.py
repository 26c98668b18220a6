"""The engine: advance a run one journaled step at a time, from whatever its journal says is next.

observe → decide → check → act | ask | wait | finish. The next step is a pure function of the last
journaled one, so a restart resumes exactly where the journal stops. A run task exists only while a
run executes; waiting runs are rows that the scheduler wakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

import structlog

from agentd.db import accounting, stamp
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.errors import AgentdError, ConfigError, NotFound, Refused, StateError
from agentd.harness import policy as harness
from agentd.harness.menu import Decision
from agentd.models import JSON, InboxKind, RunStatus, Step, StepKind, StepStatus, Verdict
from agentd.runs import control
from agentd.runs.deciding import Deciding
from agentd.runs.deps import Deps
from agentd.runs.recovery import Recovery
from agentd.sources import observe_all
from agentd.text import cut_at_word

log = structlog.get_logger("agentd.engine")
MAX_EVENTS_SHOWN = 20  # events since the previous look that a decision sees
TRANSIENT_RETRIES = 5  # database errors (a lock held too long) retried with a growing pause


class Engine:
    """Runs executing runs as tasks, at most `max_concurrent_runs` at a time."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.slots = asyncio.Semaphore(deps.config.daemon.max_concurrent_runs)
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.relaunch: dict[int, int] = {}
        self.stopping = False
        # Set while the daemon cannot vouch for its leases (daemon/leases.py): nothing launches.
        self.fenced = False
        # Drivers by runs.trigger for runs that are not observe → decide → act (build runs:
        # agentd.inner registers itself here, as it sits above the engine).
        self.drivers: dict[str, type[RunDriver]] = {}

    def launch(self, run_id: int, epoch: int) -> None:
        """Start driving a run at lease `epoch`.

        If a task for the run is still winding down (it just suspended and was woken at once), the
        launch is queued for when that task ends, so a woken run is never left without a driver.
        """
        if self.stopping or self.fenced:
            return
        if run_id in self.tasks:
            self.relaunch[run_id] = epoch
            return
        task = asyncio.create_task(self._drive(run_id, epoch), name=f"run-{run_id}")
        self.tasks[run_id] = task
        task.add_done_callback(lambda _t: self._ended(run_id))

    def _ended(self, run_id: int) -> None:
        self.tasks.pop(run_id, None)
        if run_id in self.relaunch:
            self.launch(run_id, self.relaunch.pop(run_id))

    async def _drive(self, run_id: int, epoch: int) -> None:
        async with self.slots:
            structlog.contextvars.bind_contextvars(run_id=run_id)
            attempt = 0
            while attempt < TRANSIENT_RETRIES:
                attempt += 1
                driver: RunDriver | None = None
                try:
                    driver = await RunDriver.load(self.deps, run_id, epoch, self.drivers)
                    structlog.contextvars.bind_contextvars(goal_id=driver.goal_id)
                    while not self.stopping and await self._step(driver):
                        pass
                    return
                except Refused as e:  # lease lost or run cancelled under us: stop touching it
                    log.warning("run.released", reason=str(e))
                    return
                except ConfigError as e:  # its agent was removed: end it visibly, not silently
                    log.error("run.abandoned", error=str(e))
                    await self._abandon(run_id, epoch, f"stopped: {e}")
                    return
                except StateError as e:  # a locked or briefly unwritable database
                    if self.deps.store.outage and not self.stopping:
                        # A shared database's outage (said once, db/outage.py): no retry is
                        # spent; the run goes on once it is back, or is fenced meanwhile.
                        attempt -= 1
                        await self._outage_over()
                        continue
                    if attempt < TRANSIENT_RETRIES and not self.stopping:
                        log.warning("run.retrying", error=str(e), attempt=attempt)
                        await asyncio.sleep(attempt)  # then reload the journal and go on
                        continue
                    log.error("run.stalled", error=str(e))
                    return
                except Exception as e:
                    log.exception("run.stalled")
                    if driver is not None:
                        await self._park(driver, e)
                    else:
                        await self._park_unloaded(run_id, epoch, e)
                    return

    async def _step(self, driver: RunDriver) -> bool:
        """One `advance`, its new steps counted as they ended it (the meter: a dict update) and
        traced as one span when [tracing] is on (linked to the step a wake resumes from)."""
        steps = driver.steps
        last_seq = steps[-1].seq if steps else 0
        links = (
            [s.seq for s in steps[-2:-1] if s.kind == StepKind.WAIT]
            if steps and steps[-1].kind == StepKind.WAKE
            else []
        )
        with self.deps.tracing.step(driver.run_id, driver.goal_id, last_seq + 1, links) as span:
            more = await driver.advance()
            new = list(itertools.takewhile(lambda s: s.seq > last_seq, reversed(driver.steps)))[
                ::-1
            ]
            if span is not None and new:
                span.update_name(f"step {new[0].kind}")
                span.set_attribute("agentd.step.status", str(new[-1].status))
        for step in new:
            self.deps.meter.step(str(step.kind), str(step.status))
        if new and new[-1].kind == StepKind.FINISH:  # the run's root span, sent as it ends
            status, began = str(new[-1].data.get("status")), driver.steps[0].created_at.timestamp()
            self.deps.tracing.run_ended(
                driver.run_id, driver.goal_id, driver.agent_name, status, began
            )
        return more

    async def _outage_over(self) -> None:
        """Until the database answers again (or the daemon stops): what a store outage asks of a
        run's step (the lease keeper fences the run if it lasts past the lease)."""
        while True:
            if not self.deps.store.outage or self.stopping:
                return
            await asyncio.sleep(0.25)

    async def _abandon(self, run_id: int, epoch: int, reason: str) -> None:
        """Finish a run that cannot be driven any more, with the usual notice."""

        def work(c: Any) -> None:
            run = q.get_run(c, run_id)
            control.finish(c, control.RunRef(run_id, run.goal_id, epoch, run.step_count + 1),
                           RunStatus.FAILED, reason)  # fmt: skip

        try:
            await self.deps.store.write(work)
        except AgentdError:
            log.exception("run.abandon_failed")

    def let_go(self, run_ids: set[int] | None = None) -> list[int]:
        """Stop driving `run_ids` (all runs when None) at once: their tasks are cancelled, which
        kills the process groups of the actions in flight. For runs whose lease is lost or about to
        be: another daemon may own them any moment, and only this one can reach its children."""
        gone = sorted(set(self.tasks) if run_ids is None else set(self.tasks) & run_ids)
        for run_id in gone:
            self.relaunch.pop(run_id, None)
            self.tasks[run_id].cancel()
        return gone

    def live(self) -> set[int]:
        """Runs that have a task driving them (or queued to get one)."""
        return set(self.tasks) | set(self.relaunch)

    async def _park_unloaded(self, run_id: int, epoch: int, err: Exception) -> None:
        """A run whose journal could not even be loaded waits for the operator, visibly,
        instead of staying `running` with no driver."""

        def work(c: Any) -> None:
            run = q.get_run(c, run_id)
            ref = control.RunRef(run_id, run.goal_id, epoch, run.step_count + 1, self.deps.db_id)
            question = (
                f"Run {run_id} could not be loaded: {err}. Answer to let it try again, or "
                "cancel it with `agentd runs cancel`."
            )
            control.post_and_wait(
                c, ref, InboxKind.QUESTION, "internal_error", title=cut_at_word(question),
                body=question, seq=ref.seq, rule="internal_error",
            )  # fmt: skip

        try:
            await self.deps.store.write(work)
        except Exception:
            log.exception("run.park_failed")

    async def _park(self, driver: RunDriver, err: Exception) -> None:
        """A step failed unexpectedly: hand the run to the operator instead of leaving it stuck.
        An action whose outcome was not journaled is asked about as such, never skipped."""
        try:
            last = driver.steps[-1]
            if last.kind == StepKind.ACT and last.status == StepStatus.STARTED:
                key = last.data.get("key")  # the key the intent was journaled with
                ctx = driver._context(last.seq, last.action or "", key=key)
                await driver.ask_unknown_outcome(last, ctx)
                return
            await driver.ask_operator(
                f"Run {driver.run_id} stopped on an internal error: {err}. Answer to let it "
                "observe and decide again, or cancel it with `agentd runs cancel`.",
                why="internal_error",
            )
        except Exception:
            log.exception("run.park_failed")

    async def stop(self, grace_s: float) -> None:
        """Take no new step; give steps in flight `grace_s` to reach their journal point."""
        self.stopping = True
        pending = list(self.tasks.values())
        if not pending:
            return
        _done, late = await asyncio.wait(pending, timeout=grace_s)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=5)
            log.warning("engine.cancelled_in_flight", runs=len(late))


class RunDriver(Deciding, Recovery):
    """Decides what a run does next from its journal, and does it."""

    @classmethod
    async def load(
        cls, deps: Deps, run_id: int, epoch: int, drivers: dict[str, type[RunDriver]] | None = None
    ) -> RunDriver:
        """The run's driver with its journal; `drivers` picks the class by the run's trigger."""

        def read(c: Any) -> tuple[Any, list[Step], JSON, str]:
            run = q.get_run(c, run_id)
            steps = q.list_steps(c, run_id)
            world: JSON = {}
            snapshots = [s.data["snapshot_id"] for s in steps if "snapshot_id" in s.data]
            if snapshots:  # gone (pruned by an older agentd): the run just looks again
                with contextlib.suppress(NotFound):
                    world = worlds.get_snapshot(c, snapshots[-1])
            return q.get_goal(c, run.goal_id), steps, world, run.trigger

        goal, steps, world, trigger = await deps.store.read(read)
        if goal.agent not in deps.config.agents:
            raise ConfigError(f"run {run_id}: agent {goal.agent!r} is no longer in the config")
        driver = (drivers or {}).get(trigger, cls)(deps, run_id, epoch, steps, goal)
        driver.world = world
        if steps and steps[-1].kind == StepKind.OBSERVE:
            driver.changes = steps[-1].data.get("changes", {})
        return driver

    # ── the state machine ─────────────────────────────────────────────────────────────────────

    async def advance(self) -> bool:
        """Take the next step; False when the run is no longer executing (waiting or finished)."""
        last = self.steps[-1]
        if last.kind in (StepKind.WAIT, StepKind.FINISH):
            return False
        if last.kind in (StepKind.OBSERVE, StepKind.SUMMARIZE):
            await self.decide()
        elif last.kind == StepKind.DECIDE and last.status == StepStatus.STARTED:
            await self.settle_decision(last)  # journaled, not yet parsed: never asked again
        elif last.kind == StepKind.DECIDE:
            await (self.check(last) if last.action else self.after_invalid())
        elif last.kind == StepKind.CHECK:
            await self.after_check(last)
        elif last.kind == StepKind.ACT and last.status == StepStatus.STARTED:
            await self.recover_act(last)
        elif last.kind == StepKind.WAKE:
            await self.after_wake(last)
        else:  # START, a finished ACT
            await self.observe()
        return True

    async def observe(self) -> None:
        sources = [self.deps.sources[name] for name in self.agent.sources]
        raw = await observe_all(sources)

        looks = [st for st in self.steps if st.kind == StepKind.OBSERVE]
        since = looks[-1].data.get("events_seen") if looks else None

        def write(c: Any) -> tuple[Step, JSON]:
            snapshot_id, world, diff, _ = control.record_world(
                c, self.agent_name, self.run_id, raw, self.deps.clock.now()
            )
            # Events since the previous look are part of what the run sees: an event that
            # arrived between an action and this look must not be waited for in vain.
            seen, new = qi.events_since(c, since, MAX_EVENTS_SHOWN)
            data = {
                "snapshot_id": snapshot_id,
                "changes": diff,
                "events_seen": seen,
                "events": [{"event_id": e.event_id, "name": e.name, "data": e.data} for e in new],
            }
            return q.append_step(c, self.run_id, self.epoch, StepKind.OBSERVE, data=data), world

        step, self.world = await self._write(write)
        self.steps.append(step)
        self.changes = step.data["changes"]

    async def after_invalid(self) -> None:
        invalid = self._trailing(
            lambda s: s.kind == StepKind.DECIDE and not s.action, lambda s: False
        )
        if invalid <= self.agent.limits.max_invalid_outputs:
            await self.decide()
            return
        await self.ask_operator(
            f"The model gave {invalid} invalid replies in a row; last error: "
            f"{self.steps[-1].data.get('error')}. What should this run do?",
            why="invalid_output",
        )

    async def check(self, decided: Step) -> None:
        d = Decision(decided.action or "", decided.args or {}, decided.data.get("reason", ""))
        earlier = [
            s.digest or "" for s in self.steps[:-1] if s.kind == StepKind.DECIDE and s.action
        ]
        denials = self._trailing(
            lambda s: (
                (s.kind == StepKind.CHECK and s.verdict == Verdict.DENY)
                or (s.kind == StepKind.WAKE and s.data.get("status") in ("denied", "expired"))
            ),
            lambda s: s.kind not in (StepKind.CHECK, StepKind.ACT),
        )
        acts = 0  # read only for an action with a rate limit (the check compares it with that)
        if d.action in self.agent.policy.max_per_hour:  # an hour on the rate log's clock
            acts = await self.deps.store.read(
                lambda c: accounting.count_acts_since(
                    c, self.agent_name, d.action, stamp.now(c) - 3600
                )
            )
        facts = harness.Facts(tuple(earlier), acts, denials)
        known = d.action in self.agent.actions  # else removed from the config since deciding
        action_type = self.deps.config.action(d.action).type if known else ""
        cfg = self.deps.config.action(d.action) if known else None
        verdict = harness.check(d, self.agent, facts, action_type, cfg)
        await self._append(
            StepKind.CHECK,
            action=d.action,
            args=d.args,
            digest=d.digest,
            verdict=verdict.verdict,
            data={"rule": verdict.rule, "escalate": verdict.escalate},
        )

    async def after_check(self, checked: Step) -> None:
        action, args = checked.action or "", checked.args or {}
        if checked.verdict == Verdict.ALLOW:
            await self.act(action, args)
        elif checked.verdict == Verdict.APPROVE:
            # Checked under an older config? Never ask the operator for what is now refused.
            now = harness.admit(action, args, self.menu, 0, approved=True)
            if now.verdict == Verdict.DENY:
                await self._refuse(action, args, None, now.rule)
            else:
                await self.request_approval(checked)
        elif checked.data.get("escalate"):
            await self.ask_operator(
                f"The harness refused {action} {args} ({checked.data.get('rule')}). "
                "What should this run do instead?",
                why="denied",
            )
        else:
            await self.observe()

    async def after_wake(self, woke: Step) -> None:
        why = woke.data
        if why.get("why") == "model_retry":
            await self.decide()
        elif why.get("item_kind") == InboxKind.APPROVAL and why.get("status") == "approved":
            await self.act(why["action"], why["args"], approval=why["item_id"])
        else:
            await self.observe()
