"""What one run of one policy on one scenario leaves (a `Trace`), the figures computed from it, and
their sums over seeds.

Definitions (the README repeats them): a *look* is a fire that ran (agentd: a check-in row that was
prechecked; a baseline: a fire, always a model call); a look had *nothing changed* when no world
change, operator response or finished run happened since the goal's previous look (the goal's
first look has news: the goal); the target counts those outside the week before a deadline (there
the issue wants looks: "no deadline rule requires a look"), the table shows both; a *quiet-hour
violation* is a look or a nudge delivered while the user is asleep (22:00–07:00 in their time zone
of the day); a *duplicate* is a nudge about the same need as another delivered less than 24 h
before; a *catch-up* is a look run late for a fire that fell due while the daemon was down; a
*silent drop* is a fire that was due and neither ran nor was recorded as skipped.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any

from bench.outer_sim.scenarios import DAY, Scenario, added_source, asleep, local

DEADLINE_WEEK = 7 * DAY  # the run-up to a deadline, where looks are planned, not idle
FIELDS = ("model_calls_per_goal_day", "share_no_model", "deadline_met", "quiet_violations",
          "duplicate_nudges_24h", "catchups_per_outage", "silent_drops", "nudges_accepted",
          "nudges_dismissed")  # fmt: skip


@dataclass
class Trace:
    scenario: str
    policy: str
    seed: int
    days: float
    model_calls: int = 0
    tokens: int = 0
    # (t, asked a model?, a cadence look (not an explicit schedule's)?), in the order they ran
    looks: list[tuple[float, bool, bool]] = field(default_factory=list)
    events: list[float] = field(default_factory=list)  # something changed (world, user, run end)
    nudges: list[tuple[float, str | None]] = field(default_factory=list)  # delivered (t, need)
    accepted: int = 0
    dismissed: int = 0
    needs_met: int = 0
    needs_total: int = 0
    catchups: list[int] = field(default_factory=list)  # per outage
    silent_drops: int = 0
    doubled: int = 0  # two runs for one scheduled fire (a DST bug would show here)
    extra: dict[str, Any] = field(default_factory=dict)

    def counts(self, sc: Scenario) -> dict[str, Any]:
        """The additive figures of this run."""
        looks = sorted(
            self.looks, key=lambda x: x[0]
        )  # stable: same-instant looks keep their order
        events = sorted(self.events)
        idle = {"all": 0, "all_free": 0, "off_deadline": 0, "off_deadline_free": 0}
        prev = None  # the goal's first look has news: the goal itself
        for t, model, _ in looks:
            if prev is not None and bisect.bisect_right(events, t) == bisect.bisect_right(
                events, prev
            ):
                idle["all"] += 1
                idle["all_free"] += not model
                if sc.deadline is None or t < sc.deadline - DEADLINE_WEEK:
                    idle["off_deadline"] += 1
                    idle["off_deadline_free"] += not model
            prev = t
        return {
            "runs": 1, "days": self.days, "model_calls": self.model_calls, "tokens": self.tokens,
            "looks": len(looks), "looks_free": sum(1 for _, m, _ in looks if not m),
            "idle_looks": idle["all"], "idle_free": idle["all_free"],
            "idle_looks_off_deadline": idle["off_deadline"],
            "idle_free_off_deadline": idle["off_deadline_free"],
            "quiet_fires": sum(1 for t, _, _ in looks if asleep(t, sc.tz_at(t))),
            "quiet_nudges": sum(1 for t, _ in self.nudges if asleep(t, sc.tz_at(t))),
            "nudges": len(self.nudges), "duplicates": duplicates(self.nudges),
            "accepted": self.accepted, "dismissed": self.dismissed,
            "needs_met": self.needs_met, "needs_total": self.needs_total,
            "outages": len(self.catchups), "catchups": sum(self.catchups),
            "catchups_max": max(self.catchups, default=0),
            "silent_drops": self.silent_drops, "doubled": self.doubled,
        }  # fmt: skip


def duplicates(nudges: list[tuple[float, str | None]]) -> int:
    last: dict[str, float] = {}
    n = 0
    for t, key in sorted(nudges, key=lambda x: x[0]):
        if key is None:
            continue
        if key in last and t - last[key] < DAY:
            n += 1
        last[key] = t
    return n


def add(total: dict[str, Any], counts: dict[str, Any]) -> None:
    for k, v in counts.items():
        if k == "catchups_max":
            total[k] = max(total.get(k, 0), v)
        else:
            total[k] = total.get(k, 0) + v


def scaled(counts: dict[str, Any], k: int) -> dict[str, Any]:
    """One goal's counts as `k` identical goals' (a maximum stays what it is)."""
    return {key: v if key == "catchups_max" else v * k for key, v in counts.items()}


def result(total: dict[str, Any]) -> dict[str, Any]:
    """The RESULT figures from summed counts (ratios of sums; counts are totals over seeds)."""

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 4) if b else None

    return {
        "model_calls_per_goal_day": ratio(total["model_calls"], total["days"]),
        "share_no_model": ratio(total["looks_free"], total["looks"]),
        "deadline_met": ratio(total["needs_met"], total["needs_total"]),
        "quiet_violations": total["quiet_fires"] + total["quiet_nudges"],
        "duplicate_nudges_24h": total["duplicates"],
        "catchups_per_outage": ratio(total["catchups"], total["outages"]),
        "silent_drops": total["silent_drops"],
        "nudges_accepted": total["accepted"],
        "nudges_dismissed": total["dismissed"],
    }


# ── scenario checks (agentd) ─────────────────────────────────────────────────────────────────────


def party_spread(sc: Scenario, trace: Trace) -> dict[str, Any]:
    """Looks in the week before the party: on how many distinct days, and whether one came more
    than 48 h before it."""
    assert sc.deadline is not None
    before = [t for t, _, _ in trace.looks if t < sc.deadline]
    days = {local(t, sc.tz_at(t)).date() for t in before}
    early = any(sc.deadline - t > 2 * DAY for t in before)
    return {"days_with_looks": len(days), "early_look": early, "ok": early and len(days) >= 4}


def job_backoff(trace: Trace, every_s: float) -> dict[str, Any]:
    """The interval the cadence planned at each look (the next look minus this one; any look
    re-plans the goal's next one): before the first dismissal, at the first look after the third
    (it should back off), and at the first look after the first accept (it should hold there)."""
    planned: list[tuple[float, float]] = trace.extra.get("intervals", [])
    dis, acc = trace.extra.get("dismissals", []), trace.extra.get("first_accept")
    after_acc = [g for t, g in planned if acc is not None and t >= acc]
    if len(dis) < 3 or not after_acc:
        return {"ok": None}  # the run ended before the story did
    before = [g for t, g in planned if t < dis[0]]
    after3 = [g for t, g in planned if t >= dis[2]]
    base = statistics.median(before) if before else every_s
    out = {
        "gap_before_d": round(base / DAY, 2),
        "gap_after_dismissals_d": round(after3[0] / DAY, 2) if after3 else None,
        "gap_after_accept_d": round(after_acc[0] / DAY, 2) if after_acc else None,
    }
    backs_off = bool(after3) and after3[0] >= max(2 * base, 2 * every_s)
    holds = bool(after3 and after_acc) and after_acc[0] >= 0.9 * after3[0]
    return {**out, "backs_off": backs_off, "holds": holds, "ok": backs_off and holds}


def gained_source(sc: Scenario, trace: Trace) -> dict[str, Any]:
    """The source the agent gains mid-run: model looks from the reload until its first change
    (its first look is a baseline: there should be none — nothing else moves then), and for each
    change on it, whether a model looked before the need's deadline and the user accepted."""
    add = added_source(sc)
    assert add is not None
    if add.at >= sc.end:  # cut short (`--max-days`) before the reload: nothing to judge
        return {"added_at_d": None, "extra_calls": 0, "changes": 0, "looked": 0, "met": 0,
                "judged": False}  # fmt: skip
    changes = [w for w in sc.world if w.source == add.source and w.kind == "set"
               and not w.value.get("ok", True) and w.at < sc.end]  # fmt: skip
    until = changes[0].at if changes else sc.end
    extra = sum(1 for t, model, _ in trace.looks if model and add.at <= t < until)
    deadline = {n.key: n.deadline for n in sc.needs}
    accepted: dict[str, float] = trace.extra.get("accepted", {})
    looked = met = 0
    for w in changes:
        due = deadline[str(w.need)]
        looked += any(model and w.at <= t <= due for t, model, _ in trace.looks)
        met += accepted.get(str(w.need), due + 1) <= due
    return {"added_at_d": round((add.at - sc.start) / DAY, 2), "extra_calls": extra,
            "changes": len(changes), "looked": looked, "met": met, "judged": True}  # fmt: skip
