"""`agentd checkins`' WHEN column says when a check-in ran, not when it fell due: a fire due inside
quiet hours runs at their end, and reading 04:40 beside "done" looked like a quiet-hours breach."""

from __future__ import annotations

from typing import Any

from agentd.views.outer import checkins_table

NOW = 1_800_000_000.0  # a fixed instant; the rows lie before it


def row(status: str, due_ago_s: float, done_ago_s: float | None) -> dict[str, Any]:
    return {
        "checkin_id": 1, "goal_id": 1, "schedule_id": 2, "due_at": NOW - due_ago_s,
        "fired_at": NOW - due_ago_s, "status": status, "model": None, "tokens_in": 0,
        "tokens_out": 0, "effect": None, "reason": "x", "completed_at":
        None if done_ago_s is None else NOW - done_ago_s,
    }  # fmt: skip


def test_when_is_the_time_a_checkin_ran() -> None:
    # due 5 h ago in quiet hours, ran 2 h ago when they ended
    text = checkins_table([row("done", 5 * 3600, 2 * 3600)], NOW)
    assert "2h ago" in text and "5h ago" not in text, text


def test_when_of_a_checkin_that_never_ran_is_its_due_time() -> None:
    text = checkins_table([row("missed", 5 * 3600, 5 * 3600 - 1)], NOW)
    assert "5h ago" in text, text
    waiting = checkins_table([row("due", -3600, None)], NOW)
    assert "in 1h" in waiting, waiting
