"""Every query on goals, runs and the step journal, as functions over a connection.

Write functions expect to be called inside a write transaction (the Store or SyncStore opens it) and
keep each state change together with its journal row. Engine writes are fenced by the run's lease epoch.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agentd.clock import SYSTEM
from agentd.db import schedules, stamp
from agentd.db.conn import Conn, new_id
from agentd.db.rows import (
    GOAL_COLS,
    RUN_COLS,
    STEP_COLS,
    goal_from_row,
    json_col,
    run_from_row,
    step_from_row,
)
from agentd.db.writer import Insert
from agentd.errors import NotFound, Refused
from agentd.models import (
    JSON,
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

# ── goals ────────────────────────────────────────────────────────────────────────────────────────


def add_goal(
    c: Conn,
    *,
    title: str,
    why: str,
    agent: str,
    criteria: list[str],
    deadline: float | None,
) -> int:
    now = stamp.now(c)
    cur = c.execute(
        "INSERT INTO goals (title, why, agent, status, criteria, deadline, created_at, updated_at)"
        " VALUES (?, ?, ?, 'active', ?, ?, ?, ?) RETURNING goal_id",
        (title, why, agent, json.dumps(criteria), deadline, now, now),
    )
    goal_id = new_id(cur)
    # Its cadence row, no look yet, in the same transaction: the outer loop finds every goal not
    # yet planned through `cadences_due` whatever its id — on PostgreSQL a goal can commit after
    # one with a higher id (sequence caches, two hosts), behind the loop's planning cursor.
    c.execute("INSERT INTO cadences (goal_id, updated_at) VALUES (?, ?)", (goal_id, now))
    return goal_id


def get_goal(c: Conn, goal_id: int) -> Goal:
    row = c.execute(f"SELECT {GOAL_COLS} FROM goals WHERE goal_id = ?", (goal_id,)).fetchone()
    if row is None:
        raise NotFound(f"no goal {goal_id}; `agentd goal list` shows the goals")
    return goal_from_row(row)


def list_goals(c: Conn, status: str | None = None) -> list[Goal]:
    sql = f"SELECT {GOAL_COLS} FROM goals"
    rows = (
        c.execute(sql + " WHERE status = ? ORDER BY goal_id", (status,))
        if status
        else c.execute(sql + " ORDER BY goal_id")
    )
    return [goal_from_row(r) for r in rows]


GOAL_MOVES: dict[GoalStatus, set[GoalStatus]] = {
    GoalStatus.ACTIVE: {GoalStatus.PAUSED, GoalStatus.ACHIEVED, GoalStatus.ABANDONED},
    GoalStatus.PAUSED: {GoalStatus.ACTIVE, GoalStatus.ACHIEVED, GoalStatus.ABANDONED},
    GoalStatus.ACHIEVED: set(),
    GoalStatus.ABANDONED: set(),
}


def set_goal_status(c: Conn, goal_id: int, status: GoalStatus) -> Goal:
    goal = get_goal(c, goal_id)
    if status not in GOAL_MOVES[goal.status]:
        raise Refused(f"goal {goal_id} is {goal.status}; it cannot become {status}")
    c.execute(
        "UPDATE goals SET status = ?, updated_at = ? WHERE goal_id = ?",
        (status, stamp.now(c), goal_id),
    )
    park(c, goal_id, status)
    return get_goal(c, goal_id)


def park(c: Conn, goal_id: int, status: GoalStatus) -> None:
    """A paused or closed goal's look leaves the due-look index (`next_at` NULL, `next_why`
    saying why), and its schedules' next fires the due-schedule search's range (`next_fire_at`
    NULL), so the outer loop's searches never read past them; a resumed goal gets a new first
    look, planned by the loop (`cadences_unplanned`: no look, no reason), and its schedules are
    due at once: the loop records what fell due meanwhile by each one's misfire policy, then
    computes its next fire."""
    now = stamp.now(c)
    if status != GoalStatus.ACTIVE:
        c.execute(
            "UPDATE cadences SET next_at = NULL, next_why = ?, updated_at = ? WHERE goal_id = ?",
            (f"goal {status}", now, goal_id),
        )
        c.execute(
            "UPDATE schedules SET next_fire_at = NULL WHERE goal_id = ? AND enabled = 1",
            (goal_id,),
        )
        return
    schedules.unpark(c, goal_id)
    c.execute(
        "INSERT INTO cadences (goal_id, updated_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (goal_id, now),
    )
    c.execute(
        "UPDATE cadences SET next_why = NULL, updated_at = ? WHERE goal_id = ? AND next_at IS NULL",
        (now, goal_id),
    )


# ── runs ─────────────────────────────────────────────────────────────────────────────────────────


def create_run(c: Conn, *, goal_id: int, agent: str, trigger: str, data: JSON | None = None) -> int:
    """A new run, `running`, with its START step — one transaction."""
    now = stamp.now(c)
    cur = c.execute(
        "INSERT INTO runs (goal_id, agent, status, trigger, created_at, updated_at)"
        " VALUES (?, ?, 'running', ?, ?, ?) RETURNING run_id",
        (goal_id, agent, trigger, now, now),
    )
    run_id = new_id(cur)
    c.execute(
        "INSERT INTO steps (run_id, seq, kind, status, data, created_at, completed_at)"
        " VALUES (?, 1, 'start', 'done', ?, ?, ?)",
        (run_id, json_col({"trigger": trigger, **(data or {})}), now, now),
    )
    return run_id


def get_run(c: Conn, run_id: int) -> Run:
    row = c.execute(f"SELECT {RUN_COLS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id}; `agentd runs list` shows the runs")
    return run_from_row(row)


def list_runs(
    c: Conn,
    *,
    goal_id: int | None = None,
    status: str | None = None,
    limit: int = 100,
) -> list[Run]:
    where: list[str] = []
    params: list[Any] = []
    if goal_id is not None:
        where.append("goal_id = ?")
        params.append(goal_id)
    if status:
        where.append("status = ?")
        params.append(status)
    sql = f"SELECT {RUN_COLS} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY run_id DESC LIMIT ?"
    return [run_from_row(r) for r in c.execute(sql, (*params, limit))]


def active_run_of_goal(c: Conn, goal_id: int) -> int | None:
    """The goal's running or waiting run (builds aside). In a write transaction that may start
    one, the goal's singleton is held from here to the commit: two daemons never both see none."""
    c.dialect.singleton(c, f"goal_run:{goal_id}")
    row = c.execute(
        "SELECT run_id FROM runs WHERE goal_id = ? AND status IN ('running','waiting')"
        " AND trigger != 'build' LIMIT 1",  # builds make an artifact beside the goal's run
        (goal_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def count_runs(c: Conn) -> dict[str, int]:
    return {s: n for s, n in c.execute("SELECT status, count(*) FROM runs GROUP BY status")}


def _fence(c: Conn, run_id: int, epoch: int) -> None:
    """Raise unless we still hold the run's lease at `epoch` and it is running."""
    row = c.execute(
        f"SELECT lease_epoch, status FROM runs WHERE run_id = ?{c.dialect.fence_lock}", (run_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id}")
    if row[0] != epoch:
        raise Refused(f"run {run_id}: lease lost (epoch {epoch}, now {row[0]}); not writing")
    if row[1] != RunStatus.RUNNING:
        raise Refused(f"run {run_id} is {row[1]}; not writing a step")


# ── steps ────────────────────────────────────────────────────────────────────────────────────────

INSERT_STEP = (
    f"INSERT INTO steps ({STEP_COLS}) SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,?"
    " WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND lease_epoch = ?"
    f" AND status = 'running'{Insert.FENCE})"
)  # the fence is in the statement (locked on PostgreSQL): nothing is inserted unless we hold the lease


# The journal's next step, its seq read in the statement (behind the fence: only the lease's
# holder writes a run's steps, and a wrong seq fails on the primary key, never overwrites).
NEXT_STEP = (
    INSERT_STEP.replace(
        "SELECT ?,?,", "SELECT ?,(SELECT coalesce(max(seq), 0) + 1 FROM steps WHERE run_id = ?),", 1
    )
    + " RETURNING seq"
)


def step_insert(
    run_id: int,
    epoch: int,
    kind: StepKind,
    seq: int,
    *,
    status: StepStatus = StepStatus.DONE,
    data: JSON | None = None,
    action: str | None = None,
    args: JSON | None = None,
    digest: str | None = None,
    verdict: Verdict | None = None,
    result: JSON | None = None,
    tokens_in: int = 0,
    tokens_out: int = 0,
    created_at: float | None = None,
) -> tuple[Step, Insert]:
    """A journal step as the record it will be and the fenced row that stores it.

    Built by the caller (off the writer thread); `Store.insert` commits it. `seq` is the run's
    journal length plus one — a wrong guess fails on the primary key instead of overwriting.
    `created_at` is the run loop's clock reading (the home's time: agentd/db/stamp.py), which a
    WAIT step's wake time also counts from; the wall's now only for callers without a clock
    (benches, store tests). `append_step` passes the home's now read in its transaction.
    """
    now = SYSTEM.now() if created_at is None else created_at
    done_at = None if status == StepStatus.STARTED else now
    data = data or {}
    params = (
        run_id, seq, kind, status, json_col(data), now, done_at, action, json_col(args), digest,
        verdict, json_col(result), tokens_in, tokens_out, run_id, epoch,
    )  # fmt: skip
    step = Step(
        run_id=run_id, seq=seq, kind=kind, status=status, data=data,
        created_at=from_ts(now), completed_at=from_ts(done_at),  # type: ignore[arg-type]
        action=action, args=args, digest=digest, verdict=verdict, result=result,
        tokens_in=tokens_in, tokens_out=tokens_out,
    )  # fmt: skip
    return step, Insert(INSERT_STEP, params, lambda c: _not_inserted(c, run_id, epoch, seq))


def _not_inserted(c: Conn, run_id: int, epoch: int, seq: int) -> None:
    _fence(c, run_id, epoch)  # raises the precise reason (no run, lease lost, not running)
    raise Refused(f"run {run_id}: step {seq} was not journaled")


def append_step(
    c: Conn,
    run_id: int,
    epoch: int,
    kind: StepKind,
    *,
    seq: int | None = None,
    **fields: Any,
) -> Step:
    """Journal the run's next step inside the caller's transaction and return it as stored.

    Without `seq`, the next one is read from the journal by the fenced insert itself: one
    statement (one round trip to a server) whatever the engine.
    """
    fields.setdefault("created_at", None)
    if fields["created_at"] is None:
        fields["created_at"] = stamp.now(c)
    step, row = step_insert(run_id, epoch, kind, seq or 0, **fields)
    sql, params = row.sql, row.params
    if seq is None:
        sql, params = NEXT_STEP, (run_id, run_id, *params[2:])
    sql = sql.replace(Insert.FENCE, c.dialect.fence_lock)  # the fence's lock, as the writer's
    try:
        cur = c.execute(sql, params)
        got = [int(r[0]) for r in cur.fetchall()] if seq is None else [seq] * cur.rowcount
    except c.IntegrityError:
        which = f"a step {seq}" if seq is not None else "its next step"
        raise Refused(f"run {run_id} already has {which}; the journal moved on") from None
    if len(got) != 1:
        _fence(c, run_id, epoch)  # raises the precise reason (no run, lease lost, not running)
        raise Refused(f"run {run_id}: its step {seq or 'next'} was not journaled")
    return step if seq is not None else dataclasses.replace(step, seq=got[0])


def complete_step(
    c: Conn,
    run_id: int,
    epoch: int,
    seq: int,
    *,
    status: StepStatus,
    result: JSON,
) -> Step:
    """Record the outcome of a started (intent-only) step."""
    return _update_step(
        c, run_id, epoch, seq, "status = ?, result = ?, completed_at = ?",
        (status, json_col(result), stamp.now(c)), "",
        f"run {run_id} step {seq} is not awaiting a result",
    )  # fmt: skip


def _update_step(
    c: Conn, run_id: int, epoch: int, seq: int, sets: str, values: tuple[Any, ...], where: str,
    refusal: str,
) -> Step:  # fmt: skip
    """Update a started step behind the run's fence, in one statement (one round trip to a
    server), and return it as stored; raises the fence's reason, else `refusal`, when the
    step was not updated."""
    rows = c.execute(
        f"UPDATE steps SET {sets} WHERE run_id = ? AND seq = ? AND status = 'started'{where}"
        " AND EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND lease_epoch = ?"
        f" AND status = 'running'{c.dialect.fence_lock}) RETURNING {STEP_COLS}",
        (*values, run_id, seq, run_id, epoch),
    ).fetchall()
    if len(rows) != 1:
        _fence(c, run_id, epoch)  # raises the precise reason (no run, lease lost, not running)
        raise Refused(refusal)
    return step_from_row(rows[0])


def note_step(c: Conn, run_id: int, epoch: int, seq: int, data: JSON) -> None:
    """Add keys to a started step's data (a command's process group, once it has one)."""
    _fence(c, run_id, epoch)
    step = get_step(c, run_id, seq)
    c.execute(
        "UPDATE steps SET data = ? WHERE run_id = ? AND seq = ? AND status = 'started'",
        (json_col({**step.data, **data}), run_id, seq),
    )


def settle_decision(
    c: Conn,
    run_id: int,
    epoch: int,
    seq: int,
    *,
    status: StepStatus,
    data: JSON,
    action: str | None = None,
    args: JSON | None = None,
    digest: str | None = None,
) -> Step:
    """Record how a journaled raw reply parsed: the decision, or the error to re-ask with."""
    return _update_step(
        c, run_id, epoch, seq,
        "status = ?, data = ?, action = ?, args = ?, digest = ?, completed_at = ?",
        (status, json_col(data), action, json_col(args), digest, stamp.now(c)),
        " AND kind = 'decide'", f"run {run_id} step {seq} is not a decision awaiting its parse",
    )  # fmt: skip


def get_step(c: Conn, run_id: int, seq: int) -> Step:
    row = c.execute(
        f"SELECT {STEP_COLS} FROM steps WHERE run_id = ? AND seq = ?", (run_id, seq)
    ).fetchone()
    if row is None:
        raise NotFound(f"run {run_id} has no step {seq}")
    return step_from_row(row)


def list_steps(c: Conn, run_id: int) -> list[Step]:
    rows = c.execute(f"SELECT {STEP_COLS} FROM steps WHERE run_id = ? ORDER BY seq", (run_id,))
    return [step_from_row(r) for r in rows]


# ── operator cancel ──────────────────────────────────────────────────────────────────────────────


def cancel(c: Conn, run_id: int, reason: str) -> None:
    """Operator cancel: allowed from any unfinished state; journals a FINISH step."""
    run = get_run(c, run_id)
    if run.status.finished:
        raise Refused(f"run {run_id} already {run.status}")
    now = stamp.now(c)
    c.execute(
        "INSERT INTO steps (run_id, seq, kind, status, data, created_at, completed_at)"
        " VALUES (?, ?, 'finish', 'done', ?, ?, ?)",
        (
            run_id,
            run.step_count + 1,
            json_col({"status": "cancelled", "summary": reason}),
            now,
            now,
        ),
    )
    c.execute(  # what the run still asked, or was granted and never used, is closed with it
        "UPDATE inbox SET status = 'expired', answer = ?, resolved_at = ?"
        " WHERE run_id = ? AND kind != 'notice' AND (status = 'open'"
        " OR (kind = 'approval' AND status = 'approved'))",
        (f"run cancelled: {reason}", now, run_id),
    )
    c.execute(
        "UPDATE runs SET status = 'cancelled', summary = ?,"
        " lease_epoch = lease_epoch + 1, lease_owner = NULL, wait = NULL, wait_kind = NULL,"
        " next_wake_at = NULL, updated_at = ? WHERE run_id = ?",
        (reason, now, run_id),
    )
