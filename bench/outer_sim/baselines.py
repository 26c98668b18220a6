"""The baseline policies, in memory, in the same simulation (same scenario, user and model):

- heartbeat: a model call every 30 minutes, day and night; a restart starts the timer again
  (ticks missed while down are neither run nor recorded);
- cron: a model call every day at 09:00 local (the operator moves its time zone when they move);
  after an outage, one catch-up call at the restart if a fire was missed (anacron-style);
- cron_nocatchup: the same, missed fires dropped.

Each call sees the whole current state, the goal's memory (answers, nudges, what was accepted or
dismissed) and the runs that ended since the last call — what a heartbeat agent's session holds —
and every verdict reaches the user as is: nothing deduplicates or defers a nudge. The prompt is
built with agentd's own check-in prompt builder, so the token counts compare.
"""

from __future__ import annotations

import heapq
import json
from datetime import UTC, datetime
from typing import Any

from agentd.config import Config
from agentd.harness.menu import Menu
from agentd.llm import ModelRequest
from agentd.models import JSON, Goal, GoalStatus
from agentd.outer import checkin_prompt
from bench.outer_sim import metrics
from bench.outer_sim.model import SimModel
from bench.outer_sim.scenarios import HOUR, Need, Scenario, WorldEvent, at_local, local
from bench.outer_sim.user import Item, User
from bench.outer_sim.world import World

POLICIES = ("heartbeat", "cron", "cron_nocatchup")
HEARTBEAT_S = 1800.0
CRON_AT = (9, 0)
MEMORY_ENTRIES = 40


class BaselineRun:
    """One scenario and seed under one baseline policy: `BaselineRun(sc, policy, cfg).run()`."""

    def __init__(self, sc: Scenario, policy: str, cfg: Config) -> None:
        self.sc, self.policy = sc, policy
        self.now = sc.start
        self.model = SimModel(sc, lambda: self.now)
        self.user = User.of(sc, policy)
        self.world = World(sc)
        self.trace = metrics.Trace(sc.name, policy, sc.seed, sc.days)
        self.menu = Menu(cfg, cfg.agents["default"])
        created = datetime.fromtimestamp(sc.start, UTC)
        self.goal = Goal(1, sc.title, sc.why, "default", GoalStatus.ACTIVE, sc.criteria,
                         _dt(sc.deadline), created, created)  # fmt: skip
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.up, self.closed = True, False
        self.timer = 0  # the heartbeat timer's generation (a restart starts a new one)
        self.missed = 0  # cron fires missed during the current outage
        self.outage = -1
        self.items: dict[int, JSON] = {}
        self.memory: list[JSON] = []
        self.ended: list[JSON] = []  # runs that ended since the last call
        self.pending: list[tuple[JSON, Need | None]] = []  # run ends waiting for the restart
        self.last_call: float | None = None

    def push(self, t: float, kind: str, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def run(self) -> metrics.Trace:
        sc = self.sc
        for ev in sc.world:
            self.push(ev.at, "world", ev)
        for i, o in enumerate(sc.outages):
            self.push(o.start, "down", i)
            self.push(o.end, "up", i)
            self.trace.catchups.append(0)
        self.schedule_next(sc.start)
        while self.heap and self.heap[0][0] <= sc.end:
            self.now, _, kind, payload = heapq.heappop(self.heap)
            self.handle(kind, payload)
        return self.finish()

    # ── fires ───────────────────────────────────────────────────────────────────────────────────

    def schedule_next(self, after: float) -> None:
        if self.policy == "heartbeat":
            self.push(after + HEARTBEAT_S, "fire", self.timer)
        else:
            self.push(self.next_cron(after), "fire", None)

    def next_cron(self, after: float) -> float:
        tz = self.sc.tz_at(after)
        d = local(after, tz).date()
        for k in range(3):
            t = at_local(d.fromordinal(d.toordinal() + k), *CRON_AT, tz)
            if t > after:
                return t
        raise AssertionError("no 09:00 within three days")

    def handle(self, kind: str, payload: Any) -> None:
        if kind == "fire":
            self.on_fire(payload)
        elif kind == "world":
            self.on_world(payload)
        elif kind == "down":
            self.up, self.outage, self.missed = False, payload, 0
        elif kind == "up":
            self.on_up()
        elif kind == "read":
            _done, busy = self.user.read(self, self.now)
            if busy:
                self.push(self.now + HOUR, "read")

    def on_fire(self, timer: int | None) -> None:
        if self.policy == "heartbeat" and timer != self.timer:
            return  # a timer from before a restart
        self.schedule_next(self.now)
        if not self.up:
            if self.policy == "heartbeat" or self.policy == "cron_nocatchup":
                self.trace.silent_drops += 1
            self.missed += 1
            return
        self.call()

    def on_up(self) -> None:
        self.up = True
        for run, need in self.pending:
            self.end_run(run, need)
        self.pending.clear()
        if self.policy == "heartbeat":
            self.timer += 1
            self.schedule_next(self.now)
        elif self.policy == "cron" and self.missed:
            self.trace.catchups[self.outage] += 1
            self.call()

    def on_world(self, ev: WorldEvent) -> None:
        if ev.kind == "fail":
            summary = f"{ev.value['status']} ({ev.need})"
            run = {"run_id": f"r{ev.at:.0f}", "status": "failed", "summary": summary}
            if self.up:
                self.end_run(run, None)
            else:
                self.pending.append((run, None))
        elif self.world.apply(ev):
            self.trace.events.append(self.now)

    # ── one model call ──────────────────────────────────────────────────────────────────────────

    def call(self) -> None:
        if self.closed:
            return
        facts = {
            "since": self.last_call, "state": self.world.snapshot(), "runs_finished": self.ended,
            "nudges": [_brief(i) for i in reversed(self.items.values()) if i["rule"] == "nudge"][:8],
            "open_questions": [{"item_id": i["item_id"], "title": i["text"]} for i in
                               self.items.values() if i["rule"] != "nudge" and i["status"] == "open"],
        }  # fmt: skip
        system, prompt = checkin_prompt.build(
            goal=self.goal, agent_description="", menu=self.menu.describe(), memory=self.memory,
            facts=facts, reasons=["scheduled check"], now=self.now, tz=self.sc.tz_at(self.now),
            must_ask=False, lacking=[],
        )  # fmt: skip
        context = {"goal": {"title": self.sc.title, "why": self.sc.why,
                            "criteria": self.sc.criteria}, "memory": self.memory, "facts": facts}  # fmt: skip
        request = ModelRequest(
            0, 1, self.model.calls + 1, 1, system, prompt, {}, context, "checkin"
        )
        reply = json.loads(self.model.answer(request).text)
        self.trace.looks.append((self.now, True, True))
        self.ended, self.last_call = [], self.now
        self.apply(reply["verdict"], reply["reason"])

    def apply(self, v: JSON, reason: str) -> None:
        kind = v["kind"]
        if kind == "nudge":
            item_id = self.post("nudge", v["topic"], v)
            need = self.sc.need_of(v["topic"])
            self.trace.nudges.append((self.now, need.key if need else None))
            self.remember("checkin", f"nudged (item {item_id}) on {v['topic']!r}: {v['message']}")
        elif kind in ("ask", "achieved"):
            text = v.get("question") or f"goal achieved? {v.get('evidence')}"
            rule = "clarify" if kind == "ask" else "achieved"
            if not any(i["rule"] == rule and i["status"] == "open" for i in self.items.values()):
                item_id = self.post(rule, text, v)
                self.remember("checkin", f"asked (item {item_id}): {text}")
        else:
            self.remember("checkin", f"nothing to report: {reason}")

    def post(self, rule: str, text: str, v: JSON) -> int:
        item_id = len(self.items) + 1
        self.items[item_id] = {"item_id": item_id, "rule": rule, "text": text, "status": "open",
                               "answer": None, "v": v, "posted_at": self.now}  # fmt: skip
        self.push(self.user.read_at(self.now), "read")
        return item_id

    def remember(self, kind: str, text: str) -> None:
        self.memory.append({"kind": kind, "text": text[:400], "source": "baseline", "at": self.now})
        if len(self.memory) > MEMORY_ENTRIES:
            drop = next((i for i, e in enumerate(self.memory) if e["kind"] != "answer"), 0)
            del self.memory[drop]

    # ── the user's inbox (the `Inbox` protocol) ─────────────────────────────────────────────────

    def open_items(self) -> list[Item]:
        return [Item(i["item_id"], i["rule"], i["text"], i["posted_at"])
                for i in self.items.values() if i["status"] == "open"]  # fmt: skip

    def answer(self, item: Item, text: str, now: float) -> None:
        self.items[item.item_id].update(status="answered", answer=text)
        self.trace.events.append(now)
        if item.rule == "clarify":
            self.remember("answer", f"Q: {item.text} — A: {text}")
        elif text == "yes":
            self.closed = True

    def accept(self, item: Item, now: float) -> bool:
        if any(need is not None for _, need in self.pending):
            return False  # the run of an earlier accept has not ended (the agent is down)
        it = self.items[item.item_id]
        it.update(status="answered", answer="accepted")
        self.remember(
            "accepted", f"accepted nudge {item.item_id} on {item.text!r}: {it['v']['message']}"
        )
        need = self.sc.need_of(item.text)
        if need is not None:
            run = {
                "run_id": f"n{item.item_id}",
                "status": "succeeded",
                "summary": f"done: {need.task}",
            }
            if self.up:
                self.end_run(run, need)
            else:
                self.pending.append((run, need))
        return True

    def dismiss(self, item: Item, reason: str, now: float) -> None:
        self.items[item.item_id].update(status="dismissed", answer=reason)
        self.remember("dismissed", f"dismissed nudge {item.item_id} on {item.text!r}: {reason}")

    def end_run(self, run: JSON, need: Need | None) -> None:
        """A run ended (an accepted nudge's, or a failed one): the next call hears of it."""
        self.ended.append(run)
        if need is not None:
            self.world.fix(need.key)
        self.trace.events.append(self.now)

    def finish(self) -> metrics.Trace:
        tr = self.trace
        tr.model_calls, tr.tokens = self.model.calls, self.model.tokens
        tr.events += self.user.responses
        tr.accepted, tr.dismissed = self.user.n_accepted, self.user.n_dismissed
        tr.needs_met, tr.needs_total = self.user.needs_met()
        tr.extra = {"dismissals": self.user.dismissals, "first_accept": self.user.first_accept}
        return tr


def _brief(i: JSON) -> JSON:
    return {
        "item_id": i["item_id"],
        "status": i["status"],
        "topic": i["text"],
        "answer": i["answer"],
    }


def _dt(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)
