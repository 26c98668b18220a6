"""One scenario run on agentd itself: a fresh migrated home, the real `Outer` service (catch-up at
start, ticks, `run_checkin`) with `Deps.clock` a ManualClock, the scripted model in place of the
check-in model, and the scripted user acting through `agentd.operator.inbox` (answer / accept / dismiss).

The clock jumps from event to event: the tables' next wake-up (a look, a schedule's fire), the end
of quiet hours while a fire waits, and the bench's own events (world changes, the user reading,
outages, the time-zone move). An outage stops the service and closes its store; the restart builds a
fresh `Outer` and starts it (its catch-up). World changes and run ends during an outage wait for the
restart (the poller and the runs are the daemon's). A nudge's accepted run is not driven by the
engine: the bench ends it as succeeded right away (or at the restart) — the inner loop is not what
this bench measures.

A scenario with several goals (`many`) adds them all on the one agent; each goal's check-ins are
read back into a trace of its own. A scenario whose agent gains a source rewrites the config file
and applies it as SIGHUP does (`daemon.reload`); the poller's first look at the new source follows.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import json
import math
from pathlib import Path
from typing import Any

from agentd import config
from agentd.clock import ManualClock
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import due as qd
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.store import Store, SyncStore
from agentd.errors import Refused
from agentd.models import RunStatus
from agentd.operator import inbox
from agentd.operator import schedules as plan
from agentd.outer import cadence, schedule
from agentd.outer.service import Outer
from agentd.runs import control
from bench.outer_sim import journal, metrics
from bench.outer_sim.model import SimModel
from bench.outer_sim.scenarios import HOUR, Need, Scenario, WorldEvent
from bench.outer_sim.user import Item, User
from bench.outer_sim.world import World

OWNER = "bench:1"
CONFIG = """
[daemon]
log_level = "warning"

[models.default]
provider = "scripted"
replies = "replies.json"

[models.checker]
provider = "scripted"
replies = "replies.json"

[actions.do]
type = "command"
argv = ["true", "{task}"]
params = { task = { pattern = "^[a-z0-9 .,'-]{1,80}$" } }

[agents.default]
actions = ["do", "notify", "finish"]

[agents.default.checkin]
model = "checker"
quiet = "22:00-07:00"
tz = "Europe/Berlin"
"""


def config_text(sources: tuple[str, ...] = ()) -> str:
    """The home's config; `sources` are declared and given to the agent (the bench records their
    looks itself: no poller runs)."""
    if not sources:
        return CONFIG
    text = CONFIG.replace(
        '[agents.default]\nactions = ["do", "notify", "finish"]\n',
        f'[agents.default]\nactions = ["do", "notify", "finish"]\nsources = {json.dumps(sources)}\n',
    )
    return text + "".join(f'\n[sources.{n}]\ntype = "command"\nargv = ["true"]\n' for n in sources)


def make_home(root: Path, sources: tuple[str, ...] = ()) -> config.Config:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(config_text(sources))
    finish = {"action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
    (root / "replies.json").write_text(json.dumps([finish]))
    return config.load(root / "config.toml")


class AgentdInbox:
    """The user's hands on agentd's inbox: the functions `agentd inbox …` calls."""

    def __init__(self, run: AgentdRun) -> None:
        self.run = run

    def open_items(self) -> list[Item]:
        found = self.run.sync.read(lambda c: c.execute(
            "SELECT item_id, rule, title, data, goal_id FROM inbox WHERE status = 'open'"
            " AND rule IN ('nudge', 'clarify', 'achieved')").fetchall())  # fmt: skip
        return [_item(r) for r in found]

    def answer(self, item: Item, text: str, now: float) -> None:
        inbox.answer(self.run.sync, item.item_id, text, now=now)

    def accept(self, item: Item, now: float) -> bool:
        try:
            accepted = inbox.accept(self.run.sync, self.run.cfg, item.item_id, now=now)
        except Refused:
            return False  # a run of the goal is still going (the daemon is down): later
        run_id, need = accepted.data.get("run_id"), self.run.sc.need_of(item.text)
        if run_id is not None and need is not None:
            self.run.ran(int(run_id), need)
        return True

    def dismiss(self, item: Item, reason: str, now: float) -> None:
        inbox.dismiss(self.run.sync, item.item_id, reason, now=now)


def _cadence_of(goal_id: int, c: Any) -> Any:
    return qc.cadence_row(c, goal_id)


def _checkins_of(goal_id: int, c: Any) -> list[qc.Checkin]:
    return qc.list_checkins(c, goal_id, limit=1_000_000)


def _item(r: tuple[Any, ...]) -> Item:
    """An inbox row (item_id, rule, title, data, …) as the user sees it."""
    data = json.loads(r[3] or "{}")
    text = (data.get("nudge") or {}).get("topic") or r[2]
    return Item(int(r[0]), str(r[1]), str(text), float(data.get("posted_at", 0.0)))


class AgentdRun:
    """One scenario and seed on agentd: `await AgentdRun(sc, home).run()` returns its trace."""

    def __init__(self, sc: Scenario, home: Path) -> None:
        self.sc, self.home = sc, home
        self.sources = sc.sources
        self.cfg = make_home(home, sc.sources)
        self.paths = config.Paths(home)
        self.sync = SyncStore(self.paths.db)
        self.clock = ManualClock(sc.start)
        self.model = SimModel(sc, self.clock.now)
        self.user = User.of(sc, "agentd")
        self.world = World(sc)
        self.trace = metrics.Trace(sc.name, "agentd", sc.seed, sc.days)
        self.inbox = AgentdInbox(self)
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.up = False
        self.store: Store | None = None
        self.outer: Outer | None = None
        self.deferred: list[tuple[str, Any]] = []  # world events and run ends awaiting a restart
        self.seen_item = 0
        # Per goal: its planned looks [next_at, superseded_at, why of the successor], the looks a
        # restart deferred to the end of quiet hours (→ the outage), the nudges delivered.
        self.plans: dict[int, list[list[Any]]] = {}
        self.restart_plans: dict[int, dict[float, int]] = {}
        self.nudges: dict[int, list[tuple[float, str | None]]] = {}
        self.goal_ids: list[int] = []
        self.goal_id = 0  # the first goal: a failed run's (the timeline's failures are its)

    def push(self, t: float, kind: str, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    # ── set-up, the daemon's life ───────────────────────────────────────────────────────────────

    def setup(self) -> None:
        sc, now = self.sc, self.clock.now()
        ci = self.cfg.agents["default"].checkin
        if sc.initial_world and not sc.first_boot:
            self.sync.write(
                lambda c: control.record_world(c, "default", None, sc.initial_world, now)
            )
        specs = [schedule.parse_spec(kind, spec, tz, misfire=ci.misfire,
                                     misfire_cap=ci.misfire_cap, max_lateness_s=ci.max_lateness_s,
                                     jitter_s=ci.jitter_s) for kind, spec, tz in sc.schedules]  # fmt: skip
        self.goal_ids = self.sync.write(functools.partial(self.add_goals, specs, now))
        self.goal_id = self.goal_ids[0]
        for g in self.goal_ids:
            self.plans[g], self.restart_plans[g], self.nudges[g] = [], {}, []
        if sc.initial_world and sc.first_boot:  # the poller's first look, after the goals exist
            self.sync.write(
                lambda c: control.record_world(c, "default", None, sc.initial_world, now)
            )
        for ev in sc.world:
            self.push(ev.at, "world", ev)
        for i, o in enumerate(sc.outages):
            self.push(o.start, "down", i)
            self.push(o.end, "up", i)
        if sc.tz_change is not None:
            self.push(sc.tz_change[0], "tz", sc.tz_change[1])

    def add_goals(self, specs: list[schedule.ScheduleSpec], now: float, c: Any) -> list[int]:
        """The scenario's goals, each with its cadence overrides and schedules, in one
        transaction (what `goal add`, `goal cadence`, `goal schedule` write)."""
        sc, ids = self.sc, []
        for _ in range(sc.goals):
            goal_id = q.add_goal(c, title=sc.title, why=sc.why, agent="default",
                                 criteria=sc.criteria, deadline=sc.deadline)  # fmt: skip
            # `add_goal` stamps the home's clock (agentd/db/stamp.py: the wall here, as no
            # `serve --clock-speed` recorded one); the daemon's clock here is the ManualClock.
            c.execute("UPDATE goals SET created_at = ?, updated_at = ? WHERE goal_id = ?",
                      (now, now, goal_id))  # fmt: skip
            if sc.cadence:
                qs.set_overrides(c, goal_id, now, **sc.cadence)
            for s in specs:
                qs.add(c, goal_id, kind=s.kind, spec=s.spec, tz=s.tz, misfire=s.misfire,
                       misfire_cap=s.misfire_cap, max_lateness_s=s.max_lateness_s,
                       jitter_s=s.jitter_s, now=now,
                       next_fire_at=schedule.next_fire(s, now, goal_id, now))  # fmt: skip
            ids.append(goal_id)
        return ids

    async def boot(self) -> None:
        self.cfg = config.load(self.paths.config)  # as a start does: the file as it is now
        self.store = Store(self.paths.db)
        await self.store.open()
        deps = daemon.build_deps(self.cfg, self.store, owner=OWNER)
        deps.clock = self.clock
        deps.models["checker"] = self.model
        self.outer = Outer(deps, lambda run_id, epoch: None)
        self.up = True
        await self.outer.start()
        await self.settle()

    async def shutdown(self) -> None:
        assert self.outer is not None and self.store is not None
        await self.outer.stop(1)
        await self.store.close()
        self.up, self.outer, self.store = False, None, None

    async def settle(self) -> None:
        """Tick until no check-in is left running (each started one runs to its end)."""
        assert self.outer is not None
        for _ in range(50 * self.sc.goals):
            # Between two steps of this simulation the daemon would have polled many times and
            # noticed every commit (its own and the CLI's); no wall time passes here, so it is
            # told to look at the tables again.
            self.outer.wake()
            await self.outer.tick()
            if not self.outer.tasks:
                return
            await asyncio.wait(list(self.outer.tasks.values()))
        raise RuntimeError("check-ins kept starting at one instant")

    # ── the loop ────────────────────────────────────────────────────────────────────────────────

    async def run(self) -> list[metrics.Trace]:
        self.setup()
        await self.boot()
        self.observe()
        stuck, last = 0, -math.inf
        while True:
            t = min(self.heap[0][0] if self.heap else math.inf, self.next_wake())
            if t > self.sc.end:
                break
            stuck = stuck + 1 if t <= last else 0
            if stuck > 20:  # nothing moves at this instant: let a minute pass (a poll interval)
                t = last + 60.0
            self.clock.set(t)
            last = self.clock.now()
            while self.heap and self.heap[0][0] <= last:
                _, _, kind, payload = heapq.heappop(self.heap)
                await self.handle(kind, payload)
            if self.up:
                await self.settle()
            self.observe()
        if self.up:
            await self.shutdown()
        return self.finish()

    def next_wake(self) -> float:
        """When the daemon next has something to do, as the tables say (inf while down)."""
        if not self.up:
            return math.inf
        now = self.clock.now()
        wake, waiting = self.sync.read(
            lambda c: (qd.next_wake(c, ["default"]), qc.open_ids(c, math.inf))
        )
        times = [wake] if wake is not None and wake > now else []
        if waiting:  # a fire held by quiet hours runs when they end; else poll hourly
            row = self.sync.read(lambda c: qc.cadence_row(c, self.goal_id))
            cad = cadence.cadence_from(self.cfg.agents["default"].checkin, row)
            end = cadence.leave_quiet(cad, now)
            times.append(end if end > now else now + HOUR)
        return min(times, default=math.inf)

    async def handle(self, kind: str, payload: Any) -> None:
        now = self.clock.now()
        if kind == "world":
            if payload.kind == "add":
                await self.gain_source(payload.source)
            if self.up:
                self.record(payload)
            else:
                self.deferred.append(("world", payload))
        elif kind == "down":
            await self.shutdown()
        elif kind == "up":
            for what, x in self.deferred:
                if what == "world":
                    self.record(x)
                else:
                    self.end_run(*x)
            self.deferred.clear()
            before = {g: p[-1][0] if p else None for g, p in self.plans.items()}
            await self.boot()
            for g in self.goal_ids:
                row = self.sync.read(functools.partial(_cadence_of, g)) or {}
                if row.get("next_at") != before[g] and str(row.get("next_why")).startswith("quiet"):
                    self.restart_plans[g][float(row["next_at"])] = payload
        elif kind == "tz":  # the user moved: `agentd goal cadence ID --tz …`
            self.sync.write(lambda c: self.change_tz(c, payload, now))
        elif kind == "read":
            self.read(now)

    def change_tz(self, c: Any, tz: str, now: float) -> None:
        for goal_id in self.goal_ids:
            qs.set_overrides(c, goal_id, now, tz=tz)
            # plan.set_cadence does this with the home's wall-clock now; the simulation has its own.
            plan._replan(c, self.cfg, q.get_goal(c, goal_id), now, "cadence changed")

    async def gain_source(self, name: str) -> None:
        """The operator adds a source to the agent and reloads (SIGHUP): the config file is
        rewritten and, if the daemon is up, applied as the daemon applies it; else at the start."""
        self.sources = (*self.sources, name)
        self.paths.config.write_text(config_text(self.sources))
        if self.outer is not None:
            ok = await daemon.reload(self.paths, self.outer.deps, {"checker": self.model})
            assert ok, "the config reload failed (see the log)"
            self.cfg = self.outer.deps.config

    def read(self, now: float) -> None:
        _accepted, busy = self.user.read(self.inbox, now)
        if busy:
            self.push(now + HOUR, "read")

    def ran(self, run_id: int, need: Need) -> None:
        """An accepted nudge's run: it ends now, or at the restart if the daemon is down."""
        if self.up:
            self.end_run(run_id, need)
        else:
            self.deferred.append(("run", (run_id, need)))

    # ── the world and runs ──────────────────────────────────────────────────────────────────────

    def record(self, ev: WorldEvent) -> None:
        now = self.clock.now()
        if ev.kind == "fail":
            summary = f"{ev.value['status']} ({ev.need})"
            self.sync.write(lambda c: self.ended_run(c, RunStatus.FAILED, summary))
            self.trace.events.append(now)
            return
        changed = self.world.apply(ev)
        snap = self.world.snapshot()
        self.sync.write(lambda c: control.record_world(c, "default", None, snap, now))
        if changed:
            self.trace.events.append(now)

    def ended_run(self, c: Any, status: RunStatus, summary: str, run_id: int | None = None) -> None:
        if run_id is None:
            run_id = q.create_run(c, goal_id=self.goal_id, agent="default", trigger="schedule")
        epoch = leases.claim_run(c, run_id, OWNER, 300)
        control.finish(c, control.RunRef(run_id, self.goal_id, epoch, 2), status, summary)

    def end_run(self, run_id: int, need: Need) -> None:
        self.sync.write(
            lambda c: self.ended_run(c, RunStatus.SUCCEEDED, f"done: {need.task}", run_id)
        )
        self.trace.events.append(self.clock.now())
        if self.world.fix(need.key):
            snap, now = self.world.snapshot(), self.clock.now()
            self.sync.write(lambda c: control.record_world(c, "default", None, snap, now))

    # ── watching the tables ─────────────────────────────────────────────────────────────────────

    def observe(self) -> None:
        """After each step: new items (the user will read them), and each goal's planned look."""
        now = self.clock.now()
        rows = self.sync.read(lambda c: c.execute(
            "SELECT item_id, rule, title, data, goal_id FROM inbox WHERE item_id > ?"
            " AND rule IN ('nudge', 'clarify', 'achieved') ORDER BY item_id",
            (self.seen_item,)).fetchall())  # fmt: skip
        for r in rows:
            item = _item(r)
            self.seen_item = item.item_id
            if item.rule == "nudge":
                need = self.sc.need_of(item.text)
                self.nudges[int(r[4])].append((item.posted_at, need.key if need else None))
            self.push(self.user.read_at(item.posted_at), "read")
        planned = self.sync.read(lambda c: c.execute(
            "SELECT goal_id, next_at, next_why FROM cadences WHERE next_at IS NOT NULL"
        ).fetchall())  # fmt: skip
        for goal_id, at, why in planned:
            plans = self.plans.get(goal_id)
            if plans is not None and (not plans or plans[-1][0] != at):
                if plans:
                    plans[-1][1:] = [now, str(why)]
                plans.append([float(at), None, None])

    # ── the figures ─────────────────────────────────────────────────────────────────────────────

    def finish(self) -> list[metrics.Trace]:
        """One trace per goal. The world's changes are every goal's news; the user's figures
        (responses, accepts, needs) are the first goal's, the only one with needs."""
        ignored = self.sync.read(
            lambda c: c.execute(
                "SELECT count(*) FROM goal_memory WHERE kind = 'ignored'"
            ).fetchone()
        )[0]
        sched_ids = self.sync.read(lambda c: c.execute(
            "SELECT goal_id, schedule_id FROM schedules ORDER BY schedule_id").fetchall())  # fmt: skip
        jitter_s = self.cfg.agents["default"].checkin.jitter_s
        traces = []
        for n, goal_id in enumerate(self.goal_ids):
            tr = self.trace if n == 0 else metrics.Trace(self.sc.name, "agentd", self.sc.seed,
                                                           self.sc.days)  # fmt: skip
            rows = self.sync.read(functools.partial(_checkins_of, goal_id))
            tr.model_calls, tr.tokens = self.model.per_goal.get(goal_id, [0, 0])
            tr.events = list(self.trace.events) if n else tr.events
            tr.nudges = self.nudges[goal_id]
            mine = [s for g, s in sched_ids if g == goal_id]
            journal.read(tr, self.sc, rows, self.plans[goal_id], self.restart_plans[goal_id],
                         jitter_s, mine)  # fmt: skip
            traces.append(tr)
        self.sync.close()
        first = traces[0]
        first.events += self.user.responses
        first.accepted, first.dismissed = self.user.n_accepted, self.user.n_dismissed
        first.needs_met, first.needs_total = self.user.needs_met()
        first.extra |= {"dismissals": self.user.dismissals, "first_accept": self.user.first_accept,
                        "ignored": int(ignored), "accepted": dict(self.user.accepted)}  # fmt: skip
        for tr in traces[1:]:
            tr.extra |= {"dismissals": [], "first_accept": None, "ignored": 0}
        return traces
