"""Queries for check-in schedules (`schedules`), the operator's cadence overrides (`cadences`) and
recording fires: each due time of a schedule becomes one `checkins` row (ON CONFLICT DO NOTHING on
(goal, schedule, due_at), so a fire is recorded once whatever crashes or restarts), together with
the schedule's `last_fired_at` — the durable point catch-up after an outage counts from.

A removed schedule is disabled, not deleted: the check-ins it fired keep pointing at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.db import checkins as qc
from agentd.db.checkins import CheckinStatus
from agentd.db.conn import Conn, new_id
from agentd.errors import NotFound, Refused


@dataclass(frozen=True)
class Schedule:
    schedule_id: int
    goal_id: int
    kind: str  # "cron" | "interval"
    spec: str  # a crontab, or seconds as text
    tz: str
    misfire: str  # "skip" | "once" | "all"
    misfire_cap: int
    max_lateness_s: float
    jitter_s: float
    created_at: float  # the anchor of an interval schedule
    last_fired_at: float | None  # the newest due time recorded (run or missed)
    next_fire_at: float | None  # when it is due next (NULL: not computed yet)
    enabled: bool


COLS = (
    "schedule_id, goal_id, kind, spec, tz, misfire, misfire_cap, max_lateness_s, jitter_s,"
    " created_at, last_fired_at, next_fire_at, enabled"
)


def _from_row(r: tuple[Any, ...]) -> Schedule:
    return Schedule(
        schedule_id=r[0], goal_id=r[1], kind=r[2], spec=r[3], tz=r[4], misfire=r[5],
        misfire_cap=r[6], max_lateness_s=r[7], jitter_s=r[8], created_at=r[9],
        last_fired_at=r[10], next_fire_at=r[11], enabled=bool(r[12]),
    )  # fmt: skip


def add(
    c: Conn,
    goal_id: int,
    *,
    kind: str,
    spec: str,
    tz: str,
    misfire: str,
    misfire_cap: int,
    max_lateness_s: float,
    jitter_s: float,
    now: float,
    next_fire_at: float | None,
) -> int:
    """A new schedule for a goal, counting from `now` (fires before it are not owed)."""
    cur = c.execute(
        "INSERT INTO schedules (goal_id, kind, spec, tz, misfire, misfire_cap, max_lateness_s,"
        " jitter_s, created_at, last_fired_at, next_fire_at, enabled)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING schedule_id",
        (goal_id, kind, spec, tz, misfire, misfire_cap, max_lateness_s, jitter_s, now, now,
         next_fire_at),
    )  # fmt: skip
    return new_id(cur)


def get(c: Conn, schedule_id: int) -> Schedule:
    row = c.execute(
        f"SELECT {COLS} FROM schedules WHERE schedule_id = ?", (schedule_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no schedule {schedule_id}; `agentd goal schedule GOAL_ID` lists them")
    return _from_row(row)


def of_goal(c: Conn, goal_id: int, *, enabled_only: bool = True) -> list[Schedule]:
    where = " AND enabled = 1" if enabled_only else ""
    rows = c.execute(
        f"SELECT {COLS} FROM schedules WHERE goal_id = ?{where} ORDER BY schedule_id", (goal_id,)
    )
    return [_from_row(r) for r in rows]


def remove(c: Conn, goal_id: int, schedule_id: int) -> Schedule:
    """Disable a goal's schedule (its fired check-ins keep their reference)."""
    sched = get(c, schedule_id)
    if sched.goal_id != goal_id:
        raise Refused(
            f"schedule {schedule_id} belongs to goal {sched.goal_id}, not goal {goal_id}; "
            f"`agentd goal schedule {goal_id}` lists this goal's schedules"
        )
    if not sched.enabled:
        raise Refused(f"schedule {schedule_id} was already removed")
    c.execute("UPDATE schedules SET enabled = 0 WHERE schedule_id = ?", (schedule_id,))
    return get(c, schedule_id)


def record_fires(
    c: Conn,
    sched: Schedule,
    *,
    run: list[float],
    missed: list[tuple[float, str]],
    now: float,
    next_fire_at: float | None,
) -> tuple[list[int], int]:
    """Record a schedule's fires in one transaction: `run` as due check-ins, `missed` as
    recorded-not-run (with the reason), and move `last_fired_at` to the newest of them.
    Returns (the new due check-in ids, how many rows were new in all)."""
    new_due: list[int] = []
    written = 0
    for due_at in run:
        checkin_id = qc.add_due(c, sched.goal_id, due_at, now, sched.schedule_id)
        if checkin_id is not None:
            new_due.append(checkin_id)
            written += 1
    for due_at, reason in missed:
        written += qc.add_due(
            c, sched.goal_id, due_at, now, sched.schedule_id, CheckinStatus.MISSED, reason
        ) is not None  # fmt: skip
    newest = max([*run, *(t for t, _ in missed)], default=None)
    latest = c.dialect.greatest("coalesce(last_fired_at, 0)", "coalesce(?, 0)")
    c.execute(  # a goal paused meanwhile keeps its schedules parked (queries.park)
        f"UPDATE schedules SET last_fired_at = {latest}, next_fire_at = CASE WHEN EXISTS ("
        " SELECT 1 FROM goals g WHERE g.goal_id = schedules.goal_id AND g.status = 'active')"
        " THEN CAST(? AS DOUBLE PRECISION) END WHERE schedule_id = ?",
        (newest, next_fire_at, sched.schedule_id),
    )
    return new_due, written


def unpark(c: Conn, goal_id: int) -> None:
    """An active goal's parked schedules (`next_fire_at` NULL) are due at once, from the time
    catch-up counts from (due by any clock, a simulated one too): the loop records what fell due
    meanwhile by each one's misfire policy, then computes its next fire."""
    c.execute(
        "UPDATE schedules SET next_fire_at = coalesce(last_fired_at, created_at)"
        " WHERE goal_id = ? AND enabled = 1 AND next_fire_at IS NULL",
        (goal_id,),
    )


def set_next_fire(c: Conn, schedule_id: int, next_fire_at: float | None) -> None:
    c.execute(
        "UPDATE schedules SET next_fire_at = ? WHERE schedule_id = ?", (next_fire_at, schedule_id)
    )


def last_fire(c: Conn, schedule_id: int) -> float | None:
    """The newest due time recorded for a schedule in the check-in journal."""
    row = c.execute(
        "SELECT max(due_at) FROM checkins WHERE schedule_id = ?", (schedule_id,)
    ).fetchone()
    return None if row[0] is None else float(row[0])


# ── cadences: the operator's overrides and the goal's next look ─────────────────────────────────

OVERRIDES = ("every_s", "min_s", "max_s", "quiet", "tz", "snoozed_until")


def set_overrides(c: Conn, goal_id: int, now: float, **fields: Any) -> None:
    """Upsert a goal's cadence overrides (only the fields given; None clears one to the agent's
    default). Unknown fields are a programming error."""
    unknown = set(fields) - set(OVERRIDES)
    assert not unknown, f"not cadence overrides: {unknown}"
    c.execute(
        "INSERT INTO cadences (goal_id, updated_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (goal_id, now),
    )
    if fields:
        sets = ", ".join(f"{k} = ?" for k in fields)
        c.execute(
            f"UPDATE cadences SET {sets}, updated_at = ? WHERE goal_id = ?",
            (*fields.values(), now, goal_id),
        )


def reset_cadence(c: Conn, goal_id: int, now: float) -> None:
    """Back to the agent's defaults: no overrides, no snooze, no backoff."""
    set_overrides(c, goal_id, now, **dict.fromkeys(OVERRIDES))
    c.execute("UPDATE cadences SET backoff = 0 WHERE goal_id = ?", (goal_id,))
