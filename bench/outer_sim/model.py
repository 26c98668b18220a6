"""The scripted check-in model: a `Model` that answers a check-in request from its context the way a
sensible cheap model would — and with a cheap model's slips.

It asks a clarifying question first when the goal states no criteria and the operator has not said
more; nudges, with one concrete suggested action, about what moved (a new job posting, a degraded
service, a failed run) or what a deadline now calls for (the party's to-dos in order); says nothing
otherwise; and proposes the next look. Slips, drawn from a seeded hash of the request: it sometimes
nudges before asking (15 %), repeats an open nudge under a reworded topic (10 %), and proposes to
look again in 60 s (10 %). Every reply is a valid CHECKIN reply. The same object answers agentd's
requests (context: what moved, memory) and the baselines' (context: the whole current state).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from agentd.llm import ModelReply, ModelRequest
from agentd.models import JSON
from bench.outer_sim.scenarios import DAY, HOUR, Need, Scenario

P_PREMATURE, P_REPEAT, P_MINUTE = 0.15, 0.10, 0.10
REWORD = ("{} soon", "please {}", "{} this week", "{} today")
_ALSO = re.compile(r"Also pending: \[([^\]]*)\]")
_TOPIC = re.compile(r"nudge \d+ on (['\"])(.*?)\1")


@dataclass(frozen=True)
class Cand:
    need: Need
    topic: str


class SimModel:
    """One scenario's check-in model. `now` reads the simulation's clock (the prompt states the
    time too; reading it from the clock spares parsing it back)."""

    name = "sim-cheap"

    def __init__(self, sc: Scenario, now: Callable[[], float]) -> None:
        self.sc, self.now = sc, now
        self.calls = 0
        self.tokens = 0
        self.per_goal: dict[int, list[int]] = {}  # goal_id → [calls, tokens]

    async def complete(self, request: ModelRequest) -> ModelReply:
        return self.answer(request)

    def answer(self, request: ModelRequest) -> ModelReply:
        reply = self.decide(request)
        text = json.dumps(reply)
        tokens_in = (len(request.system) + len(request.prompt)) // 4
        self.calls += 1
        self.tokens += tokens_in + len(text) // 4
        mine = self.per_goal.setdefault(request.goal_id, [0, 0])
        mine[0] += 1
        mine[1] += tokens_in + len(text) // 4
        return ModelReply(
            text=text, model=self.name, tokens_in=tokens_in, tokens_out=len(text) // 4
        )

    def _chance(self, request: ModelRequest, what: str) -> float:
        seed = f"{self.sc.name}:{self.sc.seed}:{request.decision_no}:{request.attempt}:{what}"
        digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    def decide(self, request: ModelRequest) -> JSON:
        ctx = request.context
        memory: list[JSON] = ctx.get("memory", [])
        facts: JSON = ctx.get("facts", {})
        rejected = "# Your previous reply was rejected" in request.prompt
        now = self.now()
        told = any(e["kind"] == "answer" for e in memory)
        cands = self.candidates(now, facts, memory)
        if self.sc.question and not ctx.get("goal", {}).get("criteria") and not told:
            if facts.get("open_questions") or _asked(memory):
                return _reply("waiting for the operator's answer", 6 * HOUR, {"kind": "nothing"})
            if cands and not rejected and self._chance(request, "premature") < P_PREMATURE:
                return self._nudge(request, cands, now)  # a slip: agentd refuses it
            verdict = {"kind": "ask", "question": self.sc.question}
            return _reply("the goal lacks what a useful nudge needs", 6 * HOUR, verdict)
        if self.sc.deadline is not None and now > self.sc.deadline:
            if facts.get("open_questions"):
                return _reply("waiting for the operator", None, {"kind": "nothing"})
            evidence = "the party took place; every to-do was handled"
            return _reply("the deadline passed", None, {"kind": "achieved", "evidence": evidence})
        open_topics = [n["topic"] for n in facts.get("nudges", []) if n["status"] == "open"]
        if open_topics and self._chance(request, "repeat") < P_REPEAT:
            need = self.sc.need_of(open_topics[0])
            if need is not None:  # a slip: the same nudge again, reworded
                return self._nudge(request, [Cand(need, _reword(request, need))], now)
        if cands:
            return self._nudge(request, cands, now)
        look = 60.0 if self._chance(request, "minute") < P_MINUTE else 2 * DAY
        return _reply("nothing needs the operator now", look, {"kind": "nothing"})

    def _nudge(self, request: ModelRequest, cands: list[Cand], now: float) -> JSON:
        first, rest = cands[0], cands[1:]
        message = first.need.message
        if rest:
            message += " Also pending: [" + "; ".join(c.topic for c in rest[:3]) + "]"
        verdict = {
            "kind": "nudge", "topic": first.topic, "message": message[:600],
            "suggested": {"action": "do", "args": {"task": first.need.task}}, "new": None,
        }  # fmt: skip
        if self._chance(request, "minute") < P_MINUTE:
            look: float | None = 60.0
        elif rest:
            look = 4 * HOUR
        else:
            look = DAY
        return _reply(f"{first.topic} needs doing", look, verdict)

    # ── what the model sees to do ───────────────────────────────────────────────────────────────

    def candidates(self, now: float, facts: JSON, memory: list[JSON]) -> list[Cand]:
        """What it would nudge about, most urgent first, minus what is done, open or declined."""
        seen = _SEEN[self.sc.name](self, now, facts, memory)
        # What it noted as pending in earlier nudges (agentd shows only what moved since).
        seen += [n for t in _backlog(memory) if (n := self.sc.need_of(t)) is not None]
        gone = self._handled(facts, memory) | _closed(self.sc, facts)
        out: dict[str, Need] = {}
        for need in seen:
            if need.key not in gone and need.key not in out:
                out[need.key] = need
        return [Cand(n, self.topic(n)) for n in sorted(out.values(), key=lambda n: n.deadline)]

    def topic(self, need: Need) -> str:
        """The nudge's topic: the need's label, or — in half the seeds (a model's style holds
        for a run) and for a fifth of the postings in the others — the posting's task in
        lowercase ("apply to acme senior backend engineer"): models do not always capitalise
        names, and the repeat guard must tell two postings apart either way."""
        lower = _hash01(f"{self.sc.seed}:case") < 0.5
        if need.key.startswith("p") and (lower or _hash01(f"{self.sc.seed}:{need.key}") < 0.2):
            return need.task
        return need.label

    def _handled(self, facts: JSON, memory: list[JSON]) -> set[str]:
        keys = set()
        for e in memory:
            topic = topic_of(e["text"]) if e["kind"] in ("accepted", "dismissed") else None
            if topic and (n := self.sc.need_of(topic)):
                keys.add(n.key)
        for n in facts.get("nudges", []):
            done = n["status"] in ("open", "dismissed") or n.get("answer") == "accepted"
            if done and (need := self.sc.need_of(n["topic"] or "")) is not None:
                keys.add(need.key)
        return keys

    def _party(self, now: float, facts: JSON, memory: list[JSON]) -> list[Need]:
        return [n for n in self.sc.needs if n.opens <= now < n.deadline]

    def _job(self, now: float, facts: JSON, memory: list[JSON]) -> list[Need]:
        said = " ".join(e["text"] for e in memory if e["kind"] == "answer").lower()
        found = []
        for posting in _postings(facts):
            title = posting["title"]
            if "Backend" not in title:
                continue
            if "senior" in said and not ("Senior" in title or "Staff" in title):
                continue
            slip = _hash01(f"{self.sc.seed}:{posting['id']}:place") < 0.1
            if "berlin" in said and "Munich" in title and not slip:
                continue
            found += [n for n in self.sc.needs if n.key == posting["id"]]
        return found

    def _service(self, now: float, facts: JSON, memory: list[JSON]) -> list[Need]:
        keys = [r["summary"] for r in facts.get("runs_finished", []) if r["status"] == "failed"]
        if "state" in facts:
            keys += [
                o.get("incident", "") for o in facts["state"].values() if not o.get("ok", True)
            ]
        for sample in facts.get("world_samples", []):
            for diff in sample.values():
                if isinstance(diff, dict) and diff.get("ok") == [True, False]:
                    keys.append(str(diff.get("incident", [None, ""])[1]))
        return [n for n in self.sc.needs if any(re.search(rf"\b{n.key}\b", k) for k in keys)]

    def _idle(self, now: float, facts: JSON, memory: list[JSON]) -> list[Need]:
        return []


_SEEN = {"party": SimModel._party, "job": SimModel._job, "service": SimModel._service,
         "idle": SimModel._idle, "many": SimModel._idle,
         "gains_source": SimModel._service}  # fmt: skip


def _reply(reason: str, look: float | None, verdict: JSON) -> JSON:
    return {"reason": reason, "next_look_in_s": look, "verdict": verdict}


def _reword(request: ModelRequest, need: Need) -> str:
    return REWORD[request.decision_no % len(REWORD)].format(need.label)


def topic_of(text: str) -> str | None:
    """The topic an `accepted` / `dismissed` memory entry quotes ("… nudge 5 on 'book the venue'…")."""
    m = _TOPIC.search(text)
    return m[2] if m else None


def _asked(memory: list[JSON]) -> bool:
    return any(e["kind"] == "checkin" and e["text"].startswith("asked") for e in memory)


def _backlog(memory: list[JSON]) -> list[str]:
    return [t for e in memory for m in _ALSO.finditer(e["text"]) for t in m[1].split("; ")]


def _postings(facts: JSON) -> list[JSON]:
    """Job postings it sees: all open ones (the whole state), or those new in what moved."""
    if "state" in facts:
        return list(facts["state"].get("jobs", {}).get("open", []))
    new = []
    for sample in facts.get("world_samples", []):
        old, now = (sample.get("jobs", {}).get("open") or [[], []])[:2]
        known = {p["id"] for p in old or []}
        new += [p for p in now or [] if p["id"] not in known]
    return new


def _closed(sc: Scenario, facts: JSON) -> set[str]:
    """Postings seen closing and incidents seen healed, in what moved (agentd's view); in the
    whole state, whatever is not there any more."""
    gone = set()
    if "state" in facts:
        listed = {p["id"] for p in facts["state"].get("jobs", {}).get("open", [])}
        live = {o.get("incident") for o in facts["state"].values() if isinstance(o, dict)}
        for n in sc.needs:
            if (n.key.startswith("p") and n.key not in listed) or (
                n.key.startswith("incident") and n.key not in live and not _is_run(sc, n)
            ):
                gone.add(n.key)
        return gone
    for sample in facts.get("world_samples", []):
        old, now = (sample.get("jobs", {}).get("open") or [[], []])[:2]
        gone |= {p["id"] for p in old or []} - {p["id"] for p in now or []}
        for diff in sample.values():
            if isinstance(diff, dict) and diff.get("ok") == [False, True]:
                gone.add(str(diff.get("incident", ["", None])[0]))
    return gone


def _is_run(sc: Scenario, need: Need) -> bool:
    return any(w.need == need.key and w.kind == "fail" for w in sc.world)


def _hash01(text: str) -> float:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64
