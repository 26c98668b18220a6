"""The check-in precheck, pure: did anything move since the goal's previous check-in, does a
deadline rule require a look, is the goal too vague to act on? No model, no database.

Only a look (`Precheck.look`) costs a model call; everything else is journaled as skipped. The rules
are deliberately few and countable, so an idle goal costs nothing and a deadline is never missed:

- a run of the goal finished, an inbox item of the goal was answered / accepted / dismissed, the
  agent's world changed, an event for the goal arrived, a question or approval became overdue;
- the goal's deadline entered a new stage (14 d, 7 d, 3 d, 48 h, 24 h, 6 h ahead, passed) since
  the last look a model made — a handful of looks per deadline, never one per fire;
- the goal lacks what a nudge needs (criteria, a deadline where one matters) and was never looked
  at: the first look asks clarifying questions before any nudge;
- the agent says `checkin.first_look = "ask"` and this is a new goal's first check-in.

A source's first snapshot (at first boot, or when an agent gains a source) is a baseline, not a
change: `agentd.db.marks` does not count it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentd.models import JSON

# How far ahead of a deadline each stage begins (seconds); crossing into a stage requires a look.
DEADLINE_STAGES = (14 * 86400, 7 * 86400, 3 * 86400, 2 * 86400, 86400, 6 * 3600, 0)
OVERDUE_AFTER_S = 86400.0  # an open question or approval this old counts as overdue (once)

# Words that make a goal sound time-bound: without a deadline, it should be asked for.
_TIME_BOUND = re.compile(
    r"\b(by|before|until|deadline|due|next|tomorrow|tonight|today|weekend|week|month|party|trip"
    r"|wedding|birthday|exam|interview|appointment|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday|january|february|march|april|may|june|july|august|september|october"
    r"|november|december)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Facts:
    """What moved for one goal since its previous check-in (gathered by `agentd.db.marks`)."""

    since: float | None  # the previous check-in's time (None: first check-in)
    world_changes: int  # world snapshots with non-empty `changes` for the goal's agent
    runs_finished: list[JSON]  # {run_id, status, summary}
    answers: list[JSON]  # {item_id, kind, rule, status, title, answer}: resolved by the operator
    events: int  # events for the goal (its agent's triggers, or naming the goal)
    overdue_items: list[JSON]  # {item_id, kind, title}: open questions/approvals newly overdue
    deadline: float | None
    now: float
    memory_facts: int  # answers the goal's memory holds (the operator filled gaps)
    underspecified: list[str]  # what the goal lacks ("success criteria", "a deadline")
    clarify_asked: int = 0  # clarifying questions ever posted for the goal
    model_looks: int = 0  # earlier check-ins of the goal that asked a model
    last_stage: int | None = None  # the deadline stage at the last look a model made
    first_look: bool = False  # the agent's checkin.first_look = "ask": look once at a new goal


@dataclass(frozen=True)
class Precheck:
    look: bool
    reasons: list[str]  # why a model is asked ("run 4 failed", "deadline in 20 h", …)
    stage: int | None = None  # the deadline stage now (journaled: the next precheck compares)
    must_ask: bool = False  # the goal lacks what a nudge needs: ask before any nudge


def precheck(f: Facts) -> Precheck:
    """Whether this check-in needs a model, and why (one plain reason per thing that moved)."""
    reasons = [f"run {r['run_id']} {r['status']}" for r in f.runs_finished]
    reasons += [_answer_reason(a) for a in f.answers]
    if f.world_changes:
        reasons.append(f"the world changed ({_plural(f.world_changes, 'look')})")
    if f.events:
        reasons.append(f"{_plural(f.events, 'new event')}")
    reasons += [f"{i['kind']} {i['item_id']} is overdue" for i in f.overdue_items]
    must_ask = bool(f.underspecified) and f.clarify_asked == 0
    if must_ask and f.model_looks == 0:
        reasons.append(f"the goal lacks {' and '.join(f.underspecified)}: ask first")
    elif f.first_look and f.since is None and f.model_looks == 0:
        reasons.append('a first look at a new goal (checkin.first_look = "ask")')
    stage = deadline_stage(f.deadline, f.now)
    if stage is not None and stage != f.last_stage:
        reasons.append(_deadline_reason(f.deadline, f.now))
    return Precheck(look=bool(reasons), reasons=reasons, stage=stage, must_ask=must_ask)


def deadline_stage(deadline: float | None, now: float) -> int | None:
    """Which stage of the run-up to the deadline `now` is in: None when there is no deadline
    or it is further away than the first stage; len(DEADLINE_STAGES) once it has passed."""
    if deadline is None or deadline - now > DEADLINE_STAGES[0]:
        return None
    return sum(1 for ahead in DEADLINE_STAGES if deadline - now <= ahead)


def lacking(
    title: str, why: str, criteria: list[str], deadline: float | None, answers: int
) -> list[str]:
    """What a goal lacks before a nudge can be relevant; nothing once the operator answered a
    clarifying question (the answers are in its memory and the prompt)."""
    if answers:
        return []
    out = []
    if not criteria:
        out.append("success criteria")
    if deadline is None and _TIME_BOUND.search(f"{title} {why}"):
        out.append("a deadline")
    return out


def _answer_reason(a: JSON) -> str:
    if a.get("rule") == "nudge":
        status = "accepted" if a.get("answer") == "accepted" else str(a.get("status"))
        return f"nudge {a['item_id']} {status}"
    return f"{a.get('kind', 'item')} {a['item_id']} {a.get('status')}"


def _deadline_reason(deadline: float | None, now: float) -> str:
    assert deadline is not None
    left = deadline - now
    if left <= 0:
        return f"the deadline passed {_span(-left)} ago"
    return f"the deadline is in {_span(left)}"


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{max(seconds, 0.0) / 60:.0f} min".replace("-0 min", "0 min")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
