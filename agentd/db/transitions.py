"""A run's moves under its lease, each one transaction with its journal step: parked on a wait
(`suspend`: the run becomes a row no task holds), woken by the daemon (`wake`: a new lease epoch),
finished. The operator's `cancel`, which needs no lease, stays in `queries`.
"""

from __future__ import annotations

import json

from agentd.clock import Clock
from agentd.db import stamp
from agentd.db.conn import Conn, returned_id
from agentd.db.queries import append_step
from agentd.db.rows import json_col
from agentd.errors import Refused
from agentd.models import JSON, RunStatus, Step, StepKind


def suspend(
    c: Conn,
    run_id: int,
    epoch: int,
    wait: JSON,
    *,
    item_id: int | None = None,
    event: str | None = None,
    after_event: int | None = None,
    wake_in_s: float | None = None,
    wake_at: float | None = None,
    clock: Clock | None = None,
) -> Step:
    """Journal a WAIT step and park the run as a row (no task holds it) — one transaction.

    A timer (`wake_in_s`, a sleep's seconds or a wait's timeout) counts from the WAIT step: ONE
    reading of the injected `clock` is both the step's time and what the wake time adds to, so
    the timer falls due exactly that long after the WAIT step however long the transaction took
    to get here. `wake_at` (an absolute time on the clock) caps it, or is the wake time alone.
    A timer wait records its wake time as `until`. Without a clock, the home's now (stamp.py)."""
    at = stamp.now(c) if clock is None else clock.now()
    if wake_in_s is not None:
        wake_at = at + wake_in_s if wake_at is None else min(wake_at, at + wake_in_s)
    if wait["kind"] == "timer":
        wait = {**wait, "until": wake_at}
    step = append_step(c, run_id, epoch, StepKind.WAIT, data=wait, created_at=at)
    parked = c.execute(
        "UPDATE runs SET status = 'waiting', wait = ?, wait_kind = ?, wait_item_id = ?,"
        " wait_event = ?, wait_after_event = ?, next_wake_at = ?, lease_owner = NULL,"
        " updated_at = ? WHERE run_id = ? AND lease_epoch = ? AND status = 'running'",
        # The WAIT step's seq makes each wait unique, so a wake matched against an older wait
        # of the same shape can never land on this one (see `wake(expect=...)`).
        (
            json_col({**wait, "seq": step.seq}),
            wait["kind"],
            item_id,
            event,
            after_event,
            wake_at,
            at,
            run_id,
            epoch,
        ),
    ).rowcount
    _held(parked, run_id, epoch)
    return step


def wake(
    c: Conn,
    run_id: int,
    owner: str,
    why: JSON,
    lease_s: float,
    expect: JSON | None = None,
    skip_locked: bool = False,
    due: float | None = None,
) -> int | None:
    """Move a waiting run back to running with a WAKE step; None if it was no longer waiting.

    Returns the new lease epoch. Called by the daemon only, after it matched the wait condition.
    `skip_locked`: a run another daemon is waking right now (its row locked) is left to it, None
    at once instead of a wait on the lock — for what is looked at again anyway (due timers).

    What `why` says woke the run is also the write's condition (DESIGN §7: put the predicate in
    the write): an inbox wake lands only on a wait for that item, once it is answered; an event
    wake only on a wait for that event name from before it; a timer wake (`due`: the clock's now)
    only on a wait whose timer is due. A match read before a reconnect, a retry or another
    daemon's wake can then never wake the run's next wait with the previous one's cause.
    """
    same_wait, wait_params = _caused_by(why, due)
    if skip_locked and c.dialect.skip_locked:
        same_wait += (
            " AND run_id IN (SELECT run_id FROM runs WHERE run_id = ? AND status = 'waiting'"
            f"{c.dialect.skip_locked})"
        )
        wait_params.append(run_id)
    if expect is not None:
        row = c.execute("SELECT wait FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or json.loads(row[0] or "null") != expect:
            return None  # it moved on (woken and parked again) since the match was made
        if "seq" in expect:  # and the write says so too: each wait is its WAIT step's
            same_wait += f" AND {c.dialect.jint('wait', 'seq')} = ?"
            wait_params.append(expect["seq"])
    # The lease counts wall seconds on the database's clock, not the home's (stamp.py).
    epoch = returned_id(
        c.execute(
            "UPDATE runs SET status = 'running', wait = NULL, wait_kind = NULL,"
            " wait_item_id = NULL, wait_event = NULL, wait_after_event = NULL,"
            f" next_wake_at = NULL, lease_owner = ?, lease_expires_at = {c.dialect.now_sql} + ?,"
            " lease_epoch = lease_epoch + 1, updated_at = ?"
            f" WHERE run_id = ? AND status = 'waiting'{same_wait} RETURNING lease_epoch",
            (owner, lease_s, stamp.now(c), run_id, *wait_params),
        )
    )
    if epoch is None:
        return None
    append_step(c, run_id, epoch, StepKind.WAKE, data=why)
    return epoch


def _caused_by(why: JSON, due: float | None) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) that says the run still waits for what `why` names."""
    match why.get("woke_by"):
        case "inbox":
            item = why["item_id"]
            sql = (
                " AND wait_kind = 'inbox' AND wait_item_id = ? AND EXISTS"
                " (SELECT 1 FROM inbox WHERE item_id = ? AND status != 'open')"
            )
            return sql, [item, item]
        case "event":
            sql = " AND wait_kind = 'event' AND wait_event = ? AND wait_after_event < ?"
            return sql, [why["event"], why["event_id"]]
        case "timer":
            if due is None:
                raise ValueError("a timer wake names the time it is due at (`due`)")
            return " AND next_wake_at <= ?", [due]
    return "", []


def finish(c: Conn, run_id: int, epoch: int, status: RunStatus, summary: str) -> Step:
    step = append_step(
        c, run_id, epoch, StepKind.FINISH, data={"status": str(status), "summary": summary}
    )
    finished = c.execute(
        "UPDATE runs SET status = ?, summary = ?, lease_owner = NULL, next_wake_at = NULL,"
        " updated_at = ? WHERE run_id = ? AND lease_epoch = ? AND status = 'running'",
        (status, summary, stamp.now(c), run_id, epoch),
    ).rowcount
    _held(finished, run_id, epoch)
    return step


def _held(rowcount: int, run_id: int, epoch: int) -> None:
    """Every UPDATE of a run under its lease carries the epoch in its WHERE (DESIGN §7: lock what
    you read, or put the predicate in the write): on SQLite, BEGIN IMMEDIATE and the step's fence
    already make this hold; on PostgreSQL a new owner's epoch bump may land in between."""
    if rowcount != 1:
        raise Refused(f"run {run_id}: lease lost (epoch {epoch}) or not running; not writing")
