"""What a check-in looks at: the facts since the previous check-in (gathered from the tables for
the precheck, with the new marks to journal), the apps' own context, the goal's spend against its
budget — and the model request built from what the precheck journaled.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.config import AgentConfig, McpSource
from agentd.db import accounting, world
from agentd.db import checkins as qc
from agentd.db import marks as qmarks
from agentd.db import memory as mem
from agentd.db.checkins import Checkin
from agentd.harness import policy as harness
from agentd.llm import ModelRequest
from agentd.models import JSON, Goal
from agentd.outer import checkin_prompt
from agentd.outer.precheck import OVERDUE_AFTER_S, Facts, Precheck, lacking, precheck
from agentd.runs.deps import Deps
from agentd.runs.model_calls import context_room, estimate_tokens
from agentd.sources import COUNTERS


def gather(
    c: Any, row: Checkin, goal: Goal, agent: AgentConfig, now: float
) -> tuple[Facts, Precheck, JSON, JSON]:
    """The precheck of this check-in: facts since the previous one, the verdict, the new marks
    to journal, and the raw gathering (samples the prompt shows)."""
    prev = qc.previous(c, goal.goal_id, row.checkin_id)
    marks = prev.precheck.get("marks") if prev else None
    deadline = goal.deadline.timestamp() if goal.deadline else None
    moved = qmarks.gather(
        c, goal.goal_id, goal.agent, agent.triggers, marks, goal.created_at.timestamp(), now,
        OVERDUE_AFTER_S,
    )  # fmt: skip
    # While the goal's clarifying question is open, what the world does stays pending: no look
    # for it now (the model could only wait for the answer), all of it seen once answered.
    waiting = bool(qc.open_questions(c, goal.goal_id, "clarify"))
    held = qmarks.snapshot_mark(c, goal.agent, marks, goal.created_at.timestamp())
    looks, last_stage = qc.model_looks(c, goal.goal_id, row.checkin_id)
    known = mem.answers(c, goal.goal_id)
    facts = Facts(
        since=prev.fired_at if prev else None,
        world_changes=0 if waiting else moved["world_changes"],
        runs_finished=moved["runs_finished"],
        answers=moved["answers"],
        events=moved["events"],
        overdue_items=moved["overdue_items"],
        deadline=deadline,
        now=now,
        memory_facts=known,
        underspecified=lacking(goal.title, goal.why, goal.criteria, deadline, known),
        clarify_asked=qc.count_rule(c, goal.goal_id, "clarify"),
        model_looks=looks,
        last_stage=last_stage,
        first_look=agent.checkin.first_look == "ask",
    )
    pre = precheck(facts)
    reported = (marks or {}).get("overdue", []) + [i["item_id"] for i in facts.overdue_items]
    new_marks = qmarks.marks_now(c, goal.goal_id, goal.agent, [])
    new_marks["overdue"] = [i for i in reported if i in new_marks["open_items"]]
    new_marks["held_snapshot"] = held  # kept instead of "snapshot" if this look asks (`held`)
    if waiting:
        new_marks["snapshot"] = held
    return facts, pre, new_marks, moved


def held(pre: JSON) -> JSON:
    """The precheck of a check-in that posted a clarifying question: its world mark stays where
    it was, so the look after the answer sees what this one saw."""
    marks = pre.get("marks")
    if not isinstance(marks, dict) or "held_snapshot" not in marks:
        return pre
    return {**pre, "marks": {**marks, "snapshot": marks["held_snapshot"]}}


def app_context(c: Any, deps: Deps, agent_name: str, agent: AgentConfig) -> JSON:
    """The latest look of the agent's `mcp` sources (the goal's context where an app owns it:
    saved roles, a plan's progress), without the history counters; {} when it has none."""
    names = [n for n in agent.sources if isinstance(deps.config.sources.get(n), McpSource)]
    last = world.last_snapshot(c, agent_name) if names else None
    if last is None:
        return {}
    seen = last[1]
    return {
        n: {k: v for k, v in seen[n].items() if k not in COUNTERS}
        for n in names
        if isinstance(seen.get(n), dict)
    }


def over_budget(c: Any, agent: AgentConfig, goal_id: int, now: float) -> str | None:
    if agent.budget == type(agent.budget)():
        return None
    midnight = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    total = accounting.goal_spend(c, goal_id)
    today = accounting.goal_spend(c, goal_id, midnight.timestamp())
    return harness.over_budget(agent.budget, total, today)


def request(
    deps: Deps, row: Checkin, goal: Goal, agent: AgentConfig, memory: list[JSON], now: float
) -> ModelRequest:
    p = row.precheck
    invalid = p.get("invalid", [])
    facts = p.get("facts", {})
    menu = deps.menu(goal.agent)
    name = (agent.escalation_model if invalid else None) or agent.checkin.model or agent.model
    room = context_room(deps.config.models.get(name))
    for scale in (1.0, 0.5, 0.25, 0.1):  # cut to fit the model's context_tokens, if it has one
        system, text = checkin_prompt.build(
            goal=goal, agent_description=agent.description, menu=menu.describe(), memory=memory,
            facts=facts, reasons=p.get("reasons", []), now=now, tz=p.get("tz") or agent.checkin.tz,
            must_ask=bool(p.get("must_ask")), lacking=facts.get("lacking", []),
            feedback=invalid[-1]["error"] if invalid else None, scale=scale,
        )  # fmt: skip
        if room is None or estimate_tokens(system + text) <= room:
            break
    return ModelRequest(
        run_id=0,
        goal_id=goal.goal_id,
        decision_no=int(p.get("n0", 0)) + len(invalid) + 1,
        attempt=int(p.get("attempts", 0)) + 1,
        system=system,
        prompt=text,
        schema=checkin_prompt.schema_for(menu),
        context={
            "goal": {"title": goal.title, "why": goal.why, "criteria": goal.criteria},
            "memory": memory,
            "facts": facts,
            "reasons": p.get("reasons", []),
            "menu": list(menu.models),
        },
        purpose="checkin",
    )
