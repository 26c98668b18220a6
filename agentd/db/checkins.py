"""Queries for the check-in journal (`checkins`), the inbox items check-ins post and count (nudges,
clarifying questions) and per-goal cadence rows (`cadences`); what moved since the last one: `marks`.

A check-in row moves due → skipped | deciding → decided → done | failed, each move one transaction,
guarded by the status it expects (`advance`), so a crash or a second worker never repeats one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentd.db.conn import Conn, returned_id
from agentd.db.dialect import Dialect
from agentd.db.rows import json_col
from agentd.errors import NotFound, Refused
from agentd.models import JSON
from agentd.text import cut_at_word

OPEN = ("due", "deciding", "decided")


class CheckinStatus(StrEnum):
    DUE = "due"  # fired, nothing done yet
    SKIPPED = "skipped"  # precheck: nothing moved (or budget spent, goal paused) — no model call
    MISSED = "missed"  # a fire the misfire policy did not run (recorded, never silently dropped)
    DECIDING = "deciding"  # precheck says look: the model is being asked
    DECIDED = "decided"  # the raw reply is journaled, not yet parsed and applied
    DONE = "done"  # the verdict's effect is applied
    FAILED = "failed"  # invalid replies or a model that stayed unavailable; next look as usual


@dataclass(frozen=True)
class Checkin:
    checkin_id: int
    goal_id: int
    schedule_id: int | None
    due_at: float
    fired_at: float
    status: CheckinStatus
    precheck: JSON
    raw: str | None
    decision: JSON | None
    model: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    effect: JSON | None
    next_at: float | None
    reason: str | None
    completed_at: float | None


COLS = (
    "checkin_id, goal_id, schedule_id, due_at, fired_at, status, precheck, raw, decision, model,"
    " tokens_in, tokens_out, cost_usd, effect, next_at, reason, completed_at"
)


def _from_row(r: tuple[Any, ...]) -> Checkin:
    return Checkin(
        checkin_id=r[0], goal_id=r[1], schedule_id=r[2], due_at=r[3], fired_at=r[4],
        status=CheckinStatus(r[5]), precheck=json.loads(r[6]), raw=r[7],
        decision=None if r[8] is None else json.loads(r[8]), model=r[9], tokens_in=r[10],
        tokens_out=r[11], cost_usd=r[12], effect=None if r[13] is None else json.loads(r[13]),
        next_at=r[14], reason=r[15], completed_at=r[16],
    )  # fmt: skip


def add_due(
    c: Conn,
    goal_id: int,
    due_at: float,
    fired_at: float,
    schedule_id: int | None = None,
    status: CheckinStatus = CheckinStatus.DUE,
    reason: str | None = None,
) -> int | None:
    """Record a fire once (the unique index makes a repeat a no-op); None if it was recorded
    before. `status` MISSED records a fire the misfire policy skipped, with its reason."""
    cur = c.execute(
        "INSERT INTO checkins (goal_id, schedule_id, due_at, fired_at, status, reason,"
        " completed_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING checkin_id",
        (goal_id, schedule_id, due_at, fired_at, status, reason,
         None if status == CheckinStatus.DUE else fired_at),
    )  # fmt: skip
    return returned_id(cur)


def get(c: Conn, checkin_id: int) -> Checkin:
    row = c.execute(f"SELECT {COLS} FROM checkins WHERE checkin_id = ?", (checkin_id,)).fetchone()
    if row is None:
        raise NotFound(f"no check-in {checkin_id}; `agentd checkins` lists them")
    return _from_row(row)


def list_checkins(c: Conn, goal_id: int | None = None, limit: int = 50) -> list[Checkin]:
    """The journal, newest first (all goals, or one)."""
    where, params = ("WHERE goal_id = ?", (goal_id,)) if goal_id is not None else ("", ())
    rows = c.execute(
        f"SELECT {COLS} FROM checkins {where} ORDER BY checkin_id DESC LIMIT ?", (*params, limit)
    )
    return [_from_row(r) for r in rows]


def open_ids(c: Conn, now: float, owner: str | None = None) -> list[int]:
    """Check-ins to (re)run now, oldest first: due ones (not waiting out a model backoff) and
    any left deciding or decided by a crash. With `owner`, only those it may claim (`claim`):
    another daemon's live claim is its business."""
    free, params = ("", ()) if owner is None else (f" AND {_claimable(c)}", (owner,))
    rows = c.execute(
        "SELECT checkin_id FROM checkins WHERE status IN ('due', 'deciding', 'decided')"
        f" AND due_at <= ? AND coalesce({c.dialect.jnum('precheck', 'retry_at')}, 0) <= ?"
        f"{free} ORDER BY checkin_id",
        (now, now, *params),
    )
    return [int(r[0]) for r in rows]


# ── claims: one daemon runs a check-in at a time ─────────────────────────────────────────────────
#
# Several daemons may share the database (PostgreSQL). A daemon runs a check-in only while it holds
# the row's claim (`claimed_by`, until `claim_expires_at` on the database's clock): taken with SKIP
# LOCKED by `claim`, renewed by every write of the check-in (`hold`, which refuses once the claim
# is someone else's: the predicate is in the write), let go when the check-in ends or waits
# (`release`). A daemon that dies mid check-in strands nothing: its claim lapses after CLAIM_S and
# any daemon resumes the row from its status, as after a restart.

CLAIM_S = 300.0  # database seconds a claim lasts unrenewed: above a model call's bound (120 s)


class Claimed(Refused):
    """Another daemon holds the check-in's claim: it is that daemon's to run."""


def _claimable(c: Conn, table: str = "checkins") -> str:
    """The rows the owner (the next parameter) may take: nobody's, its own, or lapsed."""
    return (
        f"({table}.claimed_by IS NULL OR {table}.claimed_by = ?"
        f" OR {table}.claim_expires_at < {c.dialect.now_sql})"
    )


def claim(
    c: Conn, checkin_ids: list[int], owner: str, now: float, claim_s: float = CLAIM_S
) -> list[int]:
    """Take the claim on those of `checkin_ids` still open, due and free, each only if it is its
    goal's oldest open check-in (a goal's check-ins go one at a time, in order); returns the ids
    taken, oldest first. Rows another transaction is claiming are skipped, not waited for."""
    if not checkin_ids:
        return []
    d = c.dialect
    rows = c.execute(
        "SELECT checkin_id FROM checkins WHERE status IN ('due', 'deciding', 'decided')"
        f" AND {d.in_list('checkin_id')} AND due_at <= ?"
        f" AND coalesce({d.jnum('precheck', 'retry_at')}, 0) <= ? AND {_claimable(c)}"
        " AND NOT EXISTS (SELECT 1 FROM checkins o WHERE o.goal_id = checkins.goal_id"
        " AND o.checkin_id < checkins.checkin_id AND o.status IN ('due', 'deciding', 'decided'))"
        f" ORDER BY checkin_id{d.skip_locked}",
        (d.list_param(checkin_ids), now, now, owner),
    ).fetchall()
    taken = [int(r[0]) for r in rows]
    if taken:
        c.execute(
            f"UPDATE checkins SET claimed_by = ?, claim_expires_at = {d.now_sql} + ?"
            f" WHERE {d.in_list('checkin_id')}",
            (owner, claim_s, d.list_param(taken)),
        )
    return taken


def hold(c: Conn, checkin_id: int, owner: str, claim_s: float = CLAIM_S) -> None:
    """At the start of a write of check-in `checkin_id`: renew `owner`'s claim, or take it if it
    is free; Refused when another daemon holds it (a claim that lapsed and was taken over: the
    late writer must not move the row on)."""
    cur = c.execute(
        f"UPDATE checkins SET claimed_by = ?, claim_expires_at = {c.dialect.now_sql} + ?"
        f" WHERE checkin_id = ? AND {_claimable(c)}",
        (owner, claim_s, checkin_id, owner),
    )
    if cur.rowcount != 1:
        raise Claimed(f"check-in {checkin_id} is claimed by another daemon")


def release(c: Conn, checkin_id: int, owner: str) -> None:
    """Let go of `owner`'s claim (the check-in ended, or waits: any daemon may take it next)."""
    c.execute(
        "UPDATE checkins SET claimed_by = NULL, claim_expires_at = NULL"
        " WHERE checkin_id = ? AND claimed_by = ?",
        (checkin_id, owner),
    )


def release_others(c: Conn, owner: str) -> int:
    """At a daemon's start on SQLite, where the home lock makes it the database's only daemon:
    every claim but its own is a dead daemon's, let go now rather than after CLAIM_S. Elsewhere
    (PostgreSQL) other owners may be alive: nothing is released, claims lapse on their own."""
    if not c.dialect.sqlite:
        return 0
    return c.execute(
        "UPDATE checkins SET claimed_by = NULL, claim_expires_at = NULL"
        " WHERE claimed_by IS NOT NULL AND claimed_by != ?",
        (owner,),
    ).rowcount


def next_retry(c: Conn) -> float | None:
    """The earliest time a check-in waiting out a model backoff wants to run again."""
    retry_at = c.dialect.jnum("precheck", "retry_at")
    row = c.execute(
        # the open statuses' partial index (checkins_open), then the one that waits out a backoff
        f"SELECT min({retry_at}) FROM checkins WHERE status IN ('due', 'deciding', 'decided')"
        f" AND status = 'due' AND {retry_at} IS NOT NULL"
    ).fetchone()
    return None if row[0] is None else float(row[0])


def older_open(c: Conn, goal_id: int, checkin_id: int) -> int | None:
    """An earlier check-in of the same goal still open: check-ins of a goal go one at a time."""
    row = c.execute(
        "SELECT min(checkin_id) FROM checkins WHERE goal_id = ? AND checkin_id < ?"
        " AND status IN ('due', 'deciding', 'decided')",
        (goal_id, checkin_id),
    ).fetchone()
    return None if row[0] is None else int(row[0])


def advance(c: Conn, checkin_id: int, expect: str, **fields: Any) -> None:
    """Move a check-in on, only from the status `expect` (else Refused: it moved already).

    JSON fields (precheck, decision, effect) are encoded here; `add_tokens` adds to the usage.
    """
    add = fields.pop("add_tokens", None)
    sets, params = [], []
    for key, value in fields.items():
        sets.append(f"{key} = ?")
        params.append(json_col(value) if key in ("precheck", "decision", "effect") else value)
    if add is not None:
        sets.append("tokens_in = tokens_in + ?, tokens_out = tokens_out + ?")
        sets.append(
            "cost_usd = CASE WHEN CAST(? AS DOUBLE PRECISION) IS NULL THEN cost_usd"
            " ELSE coalesce(cost_usd, 0) + ? END"
        )
        params += [add[0], add[1], add[2], add[2]]
    cur = c.execute(
        f"UPDATE checkins SET {', '.join(sets)} WHERE checkin_id = ? AND status = ?",
        (*params, checkin_id, expect),
    )
    if cur.rowcount != 1:
        raise Refused(f"check-in {checkin_id} is no longer {expect}")


def previous(c: Conn, goal_id: int, checkin_id: int) -> Checkin | None:
    """The goal's latest earlier check-in whose precheck marks count as seen: one that was
    skipped because nothing moved, or whose verdict was applied."""
    row = c.execute(
        f"SELECT {COLS} FROM checkins WHERE goal_id = ? AND checkin_id < ?"
        f" AND status IN ('skipped', 'done') AND {c.dialect.jtext('precheck', 'marks')} IS NOT NULL"
        " ORDER BY checkin_id DESC LIMIT 1",
        (goal_id, checkin_id),
    ).fetchone()
    return None if row is None else _from_row(row)


def failed_streak(c: Conn, goal_id: int) -> int:
    """How many of the goal's latest ended check-ins failed in a row (0: the last did not)."""
    rows = c.execute(
        "SELECT status FROM checkins WHERE goal_id = ? AND status IN ('done', 'skipped', 'failed')"
        " ORDER BY checkin_id DESC LIMIT 100",
        (goal_id,),
    ).fetchall()
    n = 0
    for (status,) in rows:
        if status != "failed":
            break
        n += 1
    return n


def model_looks(c: Conn, goal_id: int, checkin_id: int) -> tuple[int, int | None]:
    """(earlier check-ins of the goal a model answered, the deadline stage at the last one)."""
    n, stage = c.execute(
        f"SELECT count(*), (SELECT {c.dialect.jint('precheck', 'stage')} FROM checkins"
        " WHERE goal_id = ? AND checkin_id < ? AND raw IS NOT NULL ORDER BY checkin_id DESC"
        " LIMIT 1) FROM checkins WHERE goal_id = ? AND checkin_id < ? AND raw IS NOT NULL",
        (goal_id, checkin_id, goal_id, checkin_id),
    ).fetchone()
    return int(n), None if stage is None else int(stage)


def model_calls(c: Conn, goal_id: int, checkin_id: int) -> int:
    """Model replies journaled for the goal's earlier check-ins (re-asks included): the next
    request's `decision_no` is this plus one, the same after any restart."""
    row = c.execute(
        f"SELECT coalesce(sum({calls_of(c.dialect)}), 0) FROM checkins"
        " WHERE goal_id = ? AND checkin_id < ?",
        (goal_id, checkin_id),
    ).fetchone()
    return int(row[0])


def calls_of(d: Dialect) -> str:
    """A check-in row's model calls: its journaled reply, and each re-asked invalid one."""
    invalid = d.jlen("precheck", "invalid")
    return f"CASE WHEN raw IS NOT NULL THEN 1 ELSE 0 END + coalesce({invalid}, 0)"


IGNORED_AFTER_S = 86400.0  # a nudge open this long was ignored (not merely slept through)


def ignored_nudges(c: Conn, goal_id: int, checkin_id: int, now: float) -> list[int]:
    """Nudges an earlier check-in posted that are still open a day later (a whole waking day
    to read them), not yet counted as ignored."""
    d = c.dialect
    rows = c.execute(
        "SELECT item_id FROM inbox WHERE goal_id = ? AND rule = 'nudge' AND status = 'open'"
        f" AND {d.jnum('data', 'checkin_id')} < ? AND {d.jtext('data', 'ignored')} IS NULL"
        f" AND coalesce({d.jnum('data', 'posted_at')}, created_at) <= ?",
        (goal_id, checkin_id, now - IGNORED_AFTER_S),
    )
    return [int(r[0]) for r in rows]


def mark_ignored(c: Conn, item_ids: list[int], checkin_id: int) -> int:
    """Count open nudges as ignored once (each backs the cadence off once); returns how many."""
    d = c.dialect
    n = 0
    for item_id in item_ids:
        n += c.execute(
            f"UPDATE inbox SET data = {d.jset('data', 'ignored')} WHERE item_id = ?"
            f" AND status = 'open' AND {d.jtext('data', 'ignored')} IS NULL",
            (json.dumps(checkin_id), item_id),
        ).rowcount
    return n


def nudges(c: Conn, goal_id: int, limit: int = 20) -> list[JSON]:
    """The goal's recent nudges (open, dismissed, accepted): what a new nudge must not repeat.
    Times are the injected clock's where the writer recorded them (`posted_at`, `resolved_at`)."""
    d = c.dialect
    rows = c.execute(
        f"SELECT item_id, status, answer, {d.jtext('data', 'nudge.topic')},"
        f" {d.jtext('data', 'nudge.message')}, coalesce({d.jnum('data', 'posted_at')}, created_at),"
        f" coalesce({d.jnum('data', 'resolved_at')}, resolved_at) FROM inbox"
        " WHERE goal_id = ? AND rule = 'nudge' ORDER BY item_id DESC LIMIT ?",
        (goal_id, limit),
    )
    keys = ("item_id", "status", "answer", "topic", "message", "created_at", "resolved_at")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def open_questions(c: Conn, goal_id: int, rule: str) -> list[JSON]:
    rows = c.execute(
        "SELECT item_id, title FROM inbox WHERE goal_id = ? AND rule = ? AND status = 'open'"
        " ORDER BY item_id",
        (goal_id, rule),
    )
    return [{"item_id": r[0], "title": r[1]} for r in rows]


def count_rule(c: Conn, goal_id: int, rule: str) -> int:
    row = c.execute(
        "SELECT count(*) FROM inbox WHERE goal_id = ? AND rule = ?", (goal_id, rule)
    ).fetchone()
    return int(row[0])


def withdraw_goal_items(c: Conn, goal_id: int, reason: str, now: float) -> int:
    """Close the goal's own open items (nudges, clarifying questions) once it is closed."""
    return c.execute(
        "UPDATE inbox SET status = 'expired', answer = ?, resolved_at = ?"
        " WHERE goal_id = ? AND run_id IS NULL AND status = 'open'",
        (reason, now, goal_id),
    ).rowcount


def set_item_text(c: Conn, item_id: int, title: str, body: str) -> None:
    """Give a just-posted item its final wording (which names its own id: the accept command)."""
    c.execute(
        "UPDATE inbox SET title = ?, body = ? WHERE item_id = ?",
        (cut_at_word(title), body, item_id),
    )


# ── cadences ─────────────────────────────────────────────────────────────────────────────────────

CADENCE_COLS = (
    "goal_id, every_s, min_s, max_s, quiet, tz, snoozed_until, backoff, next_at, next_why,"
    " updated_at"
)


def newer_due(c: Conn, goal_id: int, checkin_id: int) -> bool:
    """Whether a later check-in of the goal is waiting to run."""
    row = c.execute(
        "SELECT 1 FROM checkins WHERE goal_id = ? AND checkin_id > ? AND status = 'due' LIMIT 1",
        (goal_id, checkin_id),
    ).fetchone()
    return row is not None


def cadence_row(c: Conn, goal_id: int) -> JSON | None:
    """The goal's cadence overrides and state (None: agent defaults, never looked at)."""
    row = c.execute(f"SELECT {CADENCE_COLS} FROM cadences WHERE goal_id = ?", (goal_id,)).fetchone()
    return None if row is None else dict(zip(CADENCE_COLS.split(", "), row, strict=True))


def _ensure_cadence(c: Conn, goal_id: int, now: float) -> None:
    c.execute(
        "INSERT INTO cadences (goal_id, updated_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (goal_id, now),
    )


def bump_backoff(c: Conn, goal_id: int, now: float, by: int = 1) -> int:
    """Back the goal's cadence off (a dismissed or ignored nudge); returns the new level. The
    level is capped well past where every_s · 2^backoff meets any max_s."""
    _ensure_cadence(c, goal_id, now)
    c.execute(
        f"UPDATE cadences SET backoff = {c.dialect.least('backoff + ?', '30')}, updated_at = ?"
        " WHERE goal_id = ?",
        (by, now, goal_id),
    )
    return int(
        c.execute("SELECT backoff FROM cadences WHERE goal_id = ?", (goal_id,)).fetchone()[0]
    )


def set_next(c: Conn, goal_id: int, next_at: float, why: str, now: float) -> None:
    """When the goal looks next, and why (what `goal show` tells). Not for a goal paused or
    closed meanwhile (a check-in that ends after `goal pause`): its look stays cleared."""
    _ensure_cadence(c, goal_id, now)
    c.execute(
        "UPDATE cadences SET next_at = ?, next_why = ?, updated_at = ? WHERE goal_id = ?"
        " AND EXISTS (SELECT 1 FROM goals g WHERE g.goal_id = ? AND g.status = 'active')",
        (next_at, why, now, goal_id, goal_id),
    )
