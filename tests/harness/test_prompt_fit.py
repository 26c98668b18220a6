"""A prompt too long for a small model's context is made to fit (issue 34, item 4): the menu as
dense JSON and the observed blocks cut inside their tags, so a 135M model's first decision reads
a short prompt instead of the whole world."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.harness import prompt
from agentd.models import Goal, GoalStatus, Step, StepKind, StepStatus

NOW = datetime(2026, 11, 30, tzinfo=UTC)
GOAL = Goal(1, "keep it up", "money", "default", GoalStatus.ACTIVE, [], None, NOW, NOW)
MENU = [
    {
        "action": f"act{i}",
        "description": "does a thing " * 5,
        "arguments": {"x": {"type": "string"}},
    }
    for i in range(6)
]
WORLD = {"health": {"status": 500, "body": "<html>" + "error " * 2000, "lines": list(range(40))}}
START = Step(run_id=1, seq=1, kind=StepKind.START, status=StepStatus.DONE, created_at=NOW,
             completed_at=NOW, data={"trigger": "state:health.unhealthy"})  # fmt: skip


def build(**kw: Any) -> tuple[str, str]:
    return prompt.build(
        goal=GOAL, agent_description="", menu=MENU, policy="", world=WORLD,
        changes={"health": {"status": 500}}, events=[{"e": "x" * 3000}], history=[START],
        history_steps=1, **kw,
    )  # fmt: skip


def test_a_prompt_given_a_budget_fits_it_with_blocks_closed() -> None:
    full = sum(map(len, build()))
    system, text = build(fit_chars=3000)
    assert full > 6_000
    assert len(system) + len(text) <= 3000
    assert text.count("<data>") == text.count("</data>") == 4  # history, changes, events, world
    assert "\\u003chtml>" in text and "<html>" not in text  # still escaped when cut
    assert text.rstrip().endswith("</data>")  # the world is last, its block closed
    assert '"act5"' in system  # the dense menu keeps every action


def test_a_budget_keeps_the_feedback_and_the_history_whole() -> None:
    _system, text = build(fit_chars=2500, feedback="reply was not JSON")
    assert "reply was not JSON" in text and "state:health.unhealthy" in text


def test_a_budget_cuts_each_source_to_its_share_not_the_first_source_whole() -> None:
    world = {"a_deployed": {"output": "v" * 3000}, "health": {"ok": False, "status": 500}}
    _system, text = prompt.build(
        goal=GOAL, agent_description="", menu=MENU, policy="", world=world, changes={},
        history=[START], history_steps=1, fit_chars=2500,
    )  # fmt: skip
    shown = text.split("# World now\n")[1]
    assert '"health":{"ok":false,"status":500}' in shown  # not crowded out by the first source
    assert shown.count("<data>") == shown.count("</data>") == 1
