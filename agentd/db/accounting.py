"""Spend and rate accounting: model tokens and cost per goal and day (runs and check-ins alike:
check-ins count against the goal's budget), and the execution log that rate limits count (only for
the actions that have a limit)."""

from __future__ import annotations

from agentd.db.checkins import calls_of
from agentd.db.conn import Conn
from agentd.models import JSON


def goal_spend(c: Conn, goal_id: int, since: float = 0.0) -> JSON:
    """Model tokens and cost used by every run and every check-in of a goal (since a time)."""
    tokens_in, tokens_out, usd = c.execute(
        "SELECT coalesce(sum(tin), 0), coalesce(sum(tout), 0), coalesce(sum(usd), 0.0) FROM ("
        f" SELECT s.tokens_in AS tin, s.tokens_out AS tout, {c.dialect.jnum('s.data', 'cost_usd')}"
        " AS usd FROM steps s JOIN runs r ON r.run_id = s.run_id"
        " WHERE r.goal_id = ? AND s.created_at >= ?"
        " UNION ALL SELECT tokens_in, tokens_out, cost_usd FROM checkins"
        " WHERE goal_id = ? AND fired_at >= ?) AS spent",
        (goal_id, since, goal_id, since),
    ).fetchone()
    # PostgreSQL sums bigints as numeric (a Decimal): counts are ints on both engines.
    tokens_in, tokens_out = int(tokens_in), int(tokens_out)
    return {
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "tokens": tokens_in + tokens_out,
        "usd": round(float(usd), 6),
    }


def usage(c: Conn, since: float = 0.0) -> list[JSON]:
    """Model calls summed by goal, model and UTC day — runs' decisions and summaries, and
    check-ins (a re-asked check-in counts its calls), and calls abandoned on their timeout:
    what `agentd usage` shows."""
    d = c.dialect
    # A call abandoned on its timeout (a model_retry WAIT step with `abandoned`) counts as a
    # call: the server may have served it. Its prompt tokens are an estimate.
    abandoned = d.jtext("s.data", "abandoned.model")
    model = f"coalesce({d.jtext('s.data', 'model')}, {abandoned})"
    tokens_in = (
        f"CASE WHEN s.kind = 'wait' THEN coalesce({d.jint('s.data', 'abandoned.tokens_in_est')}, 0)"
        " ELSE s.tokens_in END"
    )
    # The unknown model's name is a parameter: a `?` inside a literal would read as a placeholder
    # to a connection that rewrites them (PostgreSQL's), and so would the `%` of LIKE's pattern.
    rows = c.execute(
        "SELECT goal_id, model, day, sum(calls), sum(tin), sum(tout), sum(cached), sum(usd) FROM ("
        f" SELECT r.goal_id, coalesce({model}, ?) AS model,"
        f" {d.day_of('s.created_at')} AS day, 1 AS calls, {tokens_in} AS tin,"
        f" s.tokens_out AS tout, coalesce({d.jint('s.data', 'tokens_cached')}, 0) AS cached,"
        f" coalesce({d.jnum('s.data', 'cost_usd')}, 0.0) AS usd"
        " FROM steps s JOIN runs r ON r.run_id = s.run_id"
        " WHERE (s.kind IN ('decide', 'summarize', 'plan', 'generate', 'judge')"
        f" OR (s.kind = 'wait' AND {abandoned} IS NOT NULL))"
        " AND s.created_at >= ?"
        f" AND coalesce({model}, '') NOT LIKE ?"
        f" UNION ALL SELECT goal_id, model, {d.day_of('fired_at')}, {calls_of(d)},"
        " tokens_in, tokens_out, 0, coalesce(cost_usd, 0.0)"
        " FROM checkins WHERE model IS NOT NULL AND fired_at >= ?) AS u"
        " GROUP BY 1, 2, 3 ORDER BY 3, 1, 2",
        ("?", since, "operator (%", since),
    )
    keys = ("goal_id", "model", "day", "calls", "tokens_in", "tokens_out", "tokens_cached", "usd")
    return [
        dict(zip(keys, (*row[:3], *map(int, row[3:7]), float(row[7])), strict=True)) for row in rows
    ]


def count_acts_since(c: Conn, agent: str, action: str, since: float) -> int:
    """Executions (intents) of a rate-limited action by any run of the agent since a time.
    A read: what a check shows. The intent that spends the budget counts with `acts_to_admit`."""
    row = c.execute(
        "SELECT count(*) FROM rate_log WHERE agent = ? AND action = ? AND at >= ?",
        (agent, action, since),
    ).fetchone()
    return int(row[0])


def acts_to_admit(c: Conn, agent: str, action: str, since: float) -> int:
    """`count_acts_since` in the write transaction that journals the intent (whose ACT step the
    `steps_rate_log` trigger logs): the count and the spend are one read-modify-write, so the
    "rate_limits" singleton is taken first — two daemons sharing the database never both see
    the last execution left in an hour and both spend it. It is held until the intent commits."""
    c.dialect.singleton(c, "rate_limits")
    return count_acts_since(c, agent, action, since)


def set_rate_limits(c: Conn, pairs: list[tuple[str, str]]) -> None:
    """Which (agent, action) pairs have a rate limit: only their executions are logged. The table
    is replaced whole, one daemon at a time (two at once would insert the same pairs twice)."""
    c.dialect.singleton(c, "rate_limits")
    c.execute("DELETE FROM rate_limited")
    c.executemany("INSERT INTO rate_limited (agent, action) VALUES (?, ?)", pairs)
