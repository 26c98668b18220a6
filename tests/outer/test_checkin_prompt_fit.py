"""A check-in's prompt fits a small model's context (issue 34, item 4; seen live: SmolLM2 on a
2,048-token server refused every check-in, 2,487 prompt tokens, while decisions were cut to fit):
a `scale` below 1 makes the menu dense and cuts each fact section to its share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.models import Goal, GoalStatus
from agentd.outer import checkin_prompt

NOW = datetime(2026, 12, 7, tzinfo=UTC)
GOAL = Goal(1, "Keep checkout healthy", "revenue", "watch", GoalStatus.ACTIVE, ["/health 200"],
            None, NOW, NOW)  # fmt: skip
MENU = [{"action": "rollback", "description": "Roll back.", "arguments": {}}]
FACTS = {
    "runs_finished": [{"run_id": i, "summary": "restarted " * 40} for i in range(10)],
    "world_samples": [{"health": {"ok": False, "body": "x" * 400}} for _ in range(10)],
}


def build(scale: float) -> tuple[str, str]:
    kw: dict[str, Any] = {"scale": scale} if scale != 1.0 else {}
    return checkin_prompt.build(
        goal=GOAL, agent_description="", menu=MENU, memory=[], facts=FACTS,
        reasons=["health changed"], now=NOW.timestamp(), tz="UTC", must_ask=False, lacking=[],
        **kw,
    )  # fmt: skip


def test_a_smaller_scale_cuts_the_facts_and_keeps_their_blocks_closed() -> None:
    full = sum(map(len, build(1.0)))
    system, text = build(0.1)
    assert full > 6000 and len(system) + len(text) < full - 4000
    assert text.count("<data>") == text.count("</data>") == 2
    assert '"action":"rollback"' in system  # the dense menu
