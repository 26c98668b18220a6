"""A goal whose check-ins are failing, as `agentd status` and `goal show` name it (issue 20,
item 3): how many in a row (counted as the notice after `verdicts.FAILED_NOTICE_AFTER` counts
them), since when, the last error in one line and what to do. Read inside the caller's
transaction; times are unix seconds."""

from __future__ import annotations

from typing import Any

from agentd.db import checkins as qc
from agentd.models import JSON, Goal, GoalStatus
from agentd.text import urls_shown

ERROR_CHARS = 300  # the last error, in one line, at most this long
SCAN_EXTRA = 100  # rows read past the streak: fires recorded missed or still due sit between
_ENDED = frozenset(("done", "skipped", "failed"))


def what_to_do(goal_id: int, agent: str = "NAME") -> str:
    return (
        f"`agentd checkins --goal {goal_id}` shows each error; a reply agentd refused is the "
        f"check-in model's (its replies, or a model too weak for the schema: set "
        f"`[agents.{agent}.checkin] model`); `agentd doctor --ping` finds a model that does not "
        "answer; the next check-in tries again"
    )


def one_line_error(reason: str | None) -> str:
    """The error as every surface shows one: one line, URLs by scheme and host only (their path
    and query may carry a token), cut to ERROR_CHARS. Secrets were blanked where the model's
    error was caught (`llm.redact`)."""
    text = urls_shown(" ".join((reason or "no reason recorded").split()))
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def of_goal(c: Any, goal: Goal) -> JSON | None:
    """The goal's failing streak, or None: its last ended check-in did not fail, or the goal is
    closed (its check-ins are over)."""
    if goal.status not in (GoalStatus.ACTIVE, GoalStatus.PAUSED):
        return None
    streak = qc.failed_streak(c, goal.goal_id)
    if streak == 0:
        return None
    failed: list[qc.Checkin] = []
    for x in qc.list_checkins(c, goal.goal_id, limit=streak + SCAN_EXTRA):
        if str(x.status) not in _ENDED:
            continue
        if x.status != qc.CheckinStatus.FAILED or len(failed) == streak:
            break
        failed.append(x)
    # Newest first; none read only when more rows than the scan reads lie between them.
    last, first = (failed[0], failed[-1]) if failed else (None, None)
    return {
        "goal_id": goal.goal_id,
        "in_a_row": streak,
        "since": first and (first.completed_at or first.fired_at),  # the streak's first failure
        "last_at": last and (last.completed_at or last.fired_at),
        "last_checkin_id": last and last.checkin_id,
        "last_error": one_line_error(last.reason if last else None),
        "what_to_do": what_to_do(goal.goal_id, goal.agent),
    }
