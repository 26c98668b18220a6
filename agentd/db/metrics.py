"""The home-wide figures `/metrics` exports once per home (agentd/telemetry/home.py renders them):
runs by status and agent, open inbox items by kind, the oldest open approval,
nudges by goal's agent and outcome, outbox messages by channel and status — grouped counts over
indexed columns, one read. Nudge quality per goal (`agentd checkins report`) is here too.
"""

from __future__ import annotations

from typing import Any

from agentd.db.conn import Conn

# A nudge's outcome from its inbox row: accepted (answered "accepted"), dismissed, ignored (left
# until its reminder gave up: data.ignored set, or expired), open.
NUDGE_OUTCOME = (
    "CASE WHEN i.status = 'answered' THEN 'accepted' WHEN i.status = 'dismissed' THEN 'dismissed'"
    " WHEN i.status = 'expired' OR {ignored} IS NOT NULL THEN 'ignored' ELSE 'open' END"
)


def _rows(c: Conn, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in c.execute(sql, args).fetchall()]


def exporter(c: Conn, owner: str) -> bool:
    """Whether `owner` exports the home-wide figures: the first (by name) of the live daemons
    recorded in `daemons` — on a shared store one daemon does, not N. Stopped or silent past two
    leases: not live. No live row (SQLite, or a daemon not registered yet): this one."""
    row = c.execute(
        f"SELECT min(owner) FROM daemons WHERE stopped_at IS NULL"
        f" AND renewed_at > {c.dialect.now_sql} - 2 * lease_s"
    ).fetchone()
    return row is None or row[0] is None or row[0] == owner


def home(c: Conn) -> dict[str, Any]:
    """The home-wide figures, as plain rows (labels not bounded yet: the renderer does it)."""
    d = c.dialect
    ignored = d.jtext("i.data", "ignored")
    oldest = c.execute(
        f"SELECT min(created_at), {d.now_sql} FROM inbox WHERE status = 'open' AND kind = 'approval'"
    ).fetchone()
    return {
        "runs": _rows(c, "SELECT status, agent, count(*) FROM runs GROUP BY status, agent"),
        "inbox": _rows(c, "SELECT kind, count(*) FROM inbox WHERE status = 'open' GROUP BY kind"),
        "approval_oldest_s": None if oldest[0] is None else max(0.0, oldest[1] - oldest[0]),
        "nudges": _rows(
            c,
            f"SELECT g.agent, {NUDGE_OUTCOME.format(ignored=ignored)} AS outcome, count(*)"
            " FROM inbox i JOIN goals g ON g.goal_id = i.goal_id WHERE i.rule = 'nudge'"
            " GROUP BY g.agent, outcome",
        ),
        "outbox": _rows(c, "SELECT channel, status, count(*) FROM outbox GROUP BY channel, status"),
        "goals": _rows(c, "SELECT status, count(*) FROM goals GROUP BY status"),
        "held": _rows(
            c,
            "SELECT channel, count(*) FROM outbox WHERE status = 'pending'"
            " AND held_until IS NOT NULL GROUP BY channel",
        ),
        "decisions": decisions(c),
    }


DECISION_S = (60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)


def decisions(c: Conn) -> tuple[tuple[int, ...], list[int], int, float]:
    """Decided approvals still in the journal: the DECISION_S bounds, cumulative counts per
    bucket, the count and the sum of the seconds from posting to decision (a histogram's parts)."""
    wait = "(resolved_at - created_at)"
    buckets = ", ".join(f"sum(CASE WHEN {wait} <= {b} THEN 1 ELSE 0 END)" for b in DECISION_S)
    row = c.execute(
        f"SELECT {buckets}, count(*), coalesce(sum({wait}), 0) FROM inbox WHERE kind = 'approval'"
        " AND resolved_at IS NOT NULL AND status IN ('approved', 'consumed', 'denied')"
    ).fetchone()
    return DECISION_S, [int(n or 0) for n in row[: len(DECISION_S)]], int(row[-2]), float(row[-1])


def nudge_rows(c: Conn) -> list[tuple[Any, ...]]:
    """Every nudge: goal id, title, agent, outcome, posted at, reacted at (None: no reaction)."""
    d = c.dialect
    ignored = d.jtext("i.data", "ignored")
    outcome = NUDGE_OUTCOME.format(ignored=ignored)
    return _rows(
        c,
        f"SELECT g.goal_id, g.title, g.agent, {outcome},"
        f" coalesce({d.jnum('i.data', 'posted_at')}, i.created_at),"
        f" CASE WHEN i.status IN ('answered', 'dismissed')"
        f" THEN coalesce({d.jnum('i.data', 'resolved_at')}, i.resolved_at) END"
        " FROM inbox i JOIN goals g ON g.goal_id = i.goal_id WHERE i.rule = 'nudge'"
        " ORDER BY g.goal_id, i.item_id",
    )


def dismissed_goals(c: Conn, at_least: int, share: float) -> list[tuple[Any, ...]]:
    """Goals more than `share` of whose settled nudges (at least `at_least`) were dismissed:
    goal id, title, dismissed, nudges, settled, backoff — grouped in the database (`status` asks
    at every call; the `inbox_nudges` index reads only the nudges)."""
    ignored = c.dialect.jtext("i.data", "ignored")
    outcome = NUDGE_OUTCOME.format(ignored=ignored)
    return _rows(
        c,
        "SELECT goal_id, title, dismissed, nudges, settled, backoff FROM ("
        " SELECT i.goal_id, g.title, coalesce(max(k.backoff), 0) AS backoff, count(*) AS nudges,"
        f" sum(CASE WHEN {outcome} = 'dismissed' THEN 1 ELSE 0 END) AS dismissed,"
        f" sum(CASE WHEN {outcome} = 'open' THEN 0 ELSE 1 END) AS settled"
        " FROM inbox i JOIN goals g ON g.goal_id = i.goal_id"
        " LEFT JOIN cadences k ON k.goal_id = i.goal_id"
        " WHERE i.rule = 'nudge' GROUP BY i.goal_id, g.title) AS per_goal"
        " WHERE settled >= ? AND dismissed > ? * settled ORDER BY goal_id",
        (at_least, share),
    )


def cadence_rows(c: Conn) -> list[tuple[Any, ...]]:
    """Each goal's cadence: goal id, backoff steps, the next look and why."""
    return _rows(c, "SELECT goal_id, backoff, next_at, next_why FROM cadences ORDER BY goal_id")
