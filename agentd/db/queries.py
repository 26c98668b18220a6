"""Every query on goals, runs, the step journal and world snapshots, as functions over a connection.

Write functions expect to be called inside a write transaction (the Store or SyncStore opens it) and
keep each state change together with its journal row. Engine writes are fenced by the run's lease epoch.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from agentd.db.conn import Conn
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

# One encoder for every row: json.dumps with options would build a new encoder per call.
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


def json_col(value: Any) -> str | None:
    """A JSON column value (None stays NULL)."""
    if value is None:
        return None
    return "{}" if value == {} else _encode(value)  # the most common value, without the encoder


def _uj(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# ── goals ────────────────────────────────────────────────────────────────────────────────────────


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


def add_goal(
    c: Conn,
    *,
    title: str,
    why: str,
    agent: str,
    criteria: list[str],
    deadline: float | None,
) -> int:
    now = time.time()
    cur = c.execute(
        "INSERT INTO goals (title, why, agent, status, criteria, deadline, created_at, updated_at)"
        " VALUES (?, ?, ?, 'active', ?, ?, ?, ?)",
        (title, why, agent, json.dumps(criteria), deadline, now, now),
    )
    return int(cur.lastrowid or 0)


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
        (status, time.time(), goal_id),
    )
    return get_goal(c, goal_id)


# ── runs ─────────────────────────────────────────────────────────────────────────────────────────

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


def create_run(c: Conn, *, goal_id: int, agent: str, trigger: str, data: JSON | None = None) -> int:
    """A new run, `running`, with its START step — one transaction."""
    now = time.time()
    cur = c.execute(
        "INSERT INTO runs (goal_id, agent, status, trigger, created_at, updated_at)"
        " VALUES (?, ?, 'running', ?, ?, ?)",
        (goal_id, agent, trigger, now, now),
    )
    run_id = int(cur.lastrowid or 0)
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
    row = c.execute("SELECT lease_epoch, status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id}")
    if row[0] != epoch:
        raise Refused(f"run {run_id}: lease lost (epoch {epoch}, now {row[0]}); not writing")
    if row[1] != RunStatus.RUNNING:
        raise Refused(f"run {run_id} is {row[1]}; not writing a step")


# ── steps ────────────────────────────────────────────────────────────────────────────────────────

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


INSERT_STEP = (
    f"INSERT INTO steps ({STEP_COLS}) SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,?"
    " WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND lease_epoch = ?"
    " AND status = 'running')"
)  # the fence is in the statement: nothing is inserted unless we hold the lease


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
) -> tuple[Step, Insert]:
    """A journal step as the record it will be and the fenced row that stores it.

    Built by the caller (off the writer thread); `Store.insert` commits it. `seq` is the run's
    journal length plus one — a wrong guess fails on the primary key instead of overwriting.
    """
    now = time.time()
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

    Without `seq`, the next one is read from the journal (after checking the fence).
    """
    if seq is None:
        _fence(c, run_id, epoch)
        seq = int(
            c.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM steps WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
        )
    step, row = step_insert(run_id, epoch, kind, seq, **fields)
    try:
        inserted = c.execute(row.sql, row.params).rowcount
    except sqlite3.IntegrityError:
        raise Refused(f"run {run_id} already has a step {seq}; the journal moved on") from None
    if inserted != 1:
        row.explain(c)
    return step


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
    _fence(c, run_id, epoch)
    cur = c.execute(
        "UPDATE steps SET status = ?, result = ?, completed_at = ?"
        " WHERE run_id = ? AND seq = ? AND status = 'started'",
        (status, json_col(result), time.time(), run_id, seq),
    )
    if cur.rowcount != 1:
        raise Refused(f"run {run_id} step {seq} is not awaiting a result")
    return get_step(c, run_id, seq)


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
    _fence(c, run_id, epoch)
    cur = c.execute(
        "UPDATE steps SET status = ?, data = ?, action = ?, args = ?, digest = ?,"
        " completed_at = ? WHERE run_id = ? AND seq = ? AND kind = 'decide'"
        " AND status = 'started'",
        (status, json_col(data), action, json_col(args), digest, time.time(), run_id, seq),
    )
    if cur.rowcount != 1:
        raise Refused(f"run {run_id} step {seq} is not a decision awaiting its parse")
    return get_step(c, run_id, seq)


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


# ── run state transitions ────────────────────────────────────────────────────────────────────────


def suspend(
    c: Conn,
    run_id: int,
    epoch: int,
    wait: JSON,
    *,
    item_id: int | None = None,
    event: str | None = None,
    after_event: int | None = None,
    wake_at: float | None = None,
) -> Step:
    """Journal a WAIT step and park the run as a row (no task holds it) — one transaction."""
    step = append_step(c, run_id, epoch, StepKind.WAIT, data=wait)
    c.execute(
        "UPDATE runs SET status = 'waiting', wait = ?, wait_kind = ?, wait_item_id = ?,"
        " wait_event = ?, wait_after_event = ?, next_wake_at = ?, lease_owner = NULL,"
        " updated_at = ? WHERE run_id = ?",
        # The WAIT step's seq makes each wait unique, so a wake matched against an older wait
        # of the same shape can never land on this one (see `wake(expect=...)`).
        (
            json_col({**wait, "seq": step.seq}),
            wait["kind"],
            item_id,
            event,
            after_event,
            wake_at,
            time.time(),
            run_id,
        ),
    )
    return step


def wake(
    c: Conn,
    run_id: int,
    owner: str,
    why: JSON,
    lease_s: float,
    expect: JSON | None = None,
) -> int | None:
    """Move a waiting run back to running with a WAKE step; None if it was no longer waiting.

    Returns the new lease epoch. Called by the daemon only, after it matched the wait condition.
    """
    if expect is not None:
        row = c.execute("SELECT wait FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or json.loads(row[0] or "null") != expect:
            return None  # it moved on (woken and parked again) since the match was made
    now = time.time()
    cur = c.execute(
        "UPDATE runs SET status = 'running', wait = NULL, wait_kind = NULL, wait_item_id = NULL,"
        " wait_event = NULL, wait_after_event = NULL, next_wake_at = NULL, lease_owner = ?,"
        " lease_expires_at = ?, lease_epoch = lease_epoch + 1, updated_at = ?"
        " WHERE run_id = ? AND status = 'waiting'",
        (owner, now + lease_s, now, run_id),
    )
    if cur.rowcount != 1:
        return None
    epoch = int(c.execute("SELECT lease_epoch FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
    append_step(c, run_id, epoch, StepKind.WAKE, data=why)
    return epoch


def finish(c: Conn, run_id: int, epoch: int, status: RunStatus, summary: str) -> Step:
    step = append_step(
        c, run_id, epoch, StepKind.FINISH, data={"status": str(status), "summary": summary}
    )
    c.execute(
        "UPDATE runs SET status = ?, summary = ?, lease_owner = NULL, next_wake_at = NULL,"
        " updated_at = ? WHERE run_id = ?",
        (status, summary, time.time(), run_id),
    )
    return step


def cancel(c: Conn, run_id: int, reason: str) -> None:
    """Operator cancel: allowed from any unfinished state; journals a FINISH step."""
    run = get_run(c, run_id)
    if run.status.finished:
        raise Refused(f"run {run_id} already {run.status}")
    now = time.time()
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
