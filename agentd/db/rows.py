"""Goals, runs and journal steps as rows and back: the column lists the queries select, the row →
record mappings, and the encoding of JSON columns that every query module writes with.
"""

from __future__ import annotations

import json
from typing import Any

from agentd.models import (
    Goal,
    GoalStatus,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Verdict,
    from_ts,
)

# One encoder for every row: json.dumps with options would build a new encoder per call.
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


def json_col(value: Any) -> str | None:
    """A JSON column value (None stays NULL)."""
    if value is None:
        return None
    return "{}" if value == {} else _encode(value)  # the most common value, without the encoder


def _uj(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def goal_from_row(r: tuple[Any, ...]) -> Goal:
    return Goal(
        goal_id=r[0],
        title=r[1],
        why=r[2],
        agent=r[3],
        status=GoalStatus(r[4]),
        criteria=json.loads(r[5]),
        deadline=from_ts(r[6]),
        created_at=from_ts(r[7]),  # type: ignore[arg-type]  # NOT NULL column
        updated_at=from_ts(r[8]),  # type: ignore[arg-type]
    )


GOAL_COLS = "goal_id, title, why, agent, status, criteria, deadline, created_at, updated_at"


RUN_COLS = (
    "run_id, goal_id, agent, status, trigger,"
    " (SELECT coalesce(max(seq), 0) FROM steps s WHERE s.run_id = runs.run_id),"
    " wait, next_wake_at, summary,"
    " created_at, updated_at, lease_owner, lease_epoch"
)


def run_from_row(r: tuple[Any, ...]) -> Run:
    return Run(
        run_id=r[0],
        goal_id=r[1],
        agent=r[2],
        status=RunStatus(r[3]),
        trigger=r[4],
        step_count=r[5],
        wait=_uj(r[6]),
        next_wake_at=from_ts(r[7]),
        summary=r[8],
        created_at=from_ts(r[9]),  # type: ignore[arg-type]  # NOT NULL column
        updated_at=from_ts(r[10]),  # type: ignore[arg-type]
        lease_owner=r[11],
        lease_epoch=r[12],
    )


STEP_COLS = (
    "run_id, seq, kind, status, data, created_at, completed_at, action, args, digest, verdict,"
    " result, tokens_in, tokens_out"
)


def step_from_row(r: tuple[Any, ...]) -> Step:
    return Step(
        run_id=r[0],
        seq=r[1],
        kind=StepKind(r[2]),
        status=StepStatus(r[3]),
        data=json.loads(r[4]),
        created_at=from_ts(r[5]),  # type: ignore[arg-type]  # NOT NULL column
        completed_at=from_ts(r[6]),
        action=r[7],
        args=_uj(r[8]),
        digest=r[9],
        verdict=Verdict(r[10]) if r[10] else None,
        result=_uj(r[11]),
        tokens_in=r[12],
        tokens_out=r[13],
    )
