"""Reads that keep the inbox from repeating itself: an open item already saying the same thing
(one notice for a refused model, however many runs hit it), and what one run posted lately (the
per-run limit on notices and questions)."""

from __future__ import annotations

import re

from agentd.db.conn import Conn

_NUMBER = re.compile(r"\d+")


def open_item_titled(c: Conn, rule: str, title: str) -> int | None:
    """The oldest open inbox item with this rule and title, if any — numbers aside: a server's
    message names the tokens each prompt asked for ("you requested 2743 tokens"), and the same
    refusal with another count is still the same refusal."""
    rows = c.execute(
        "SELECT item_id, title FROM inbox WHERE status = 'open' AND rule = ? ORDER BY item_id",
        (rule,),
    ).fetchall()
    same = _NUMBER.sub("#", title)
    return next((int(r[0]) for r in rows if _NUMBER.sub("#", str(r[1])) == same), None)


def posted_by_run(c: Conn, run_id: int) -> list[tuple[float, str, str]]:
    """(when, kind, title and body) of the notices and questions a run posted, oldest first —
    those its actions posted (approvals and the harness's own notices are never limited)."""
    rows = c.execute(
        "SELECT created_at, kind, title, body FROM inbox WHERE run_id = ? AND seq IS NOT NULL"
        " AND kind IN ('notice', 'question') AND coalesce(rule, '') = '' ORDER BY item_id",
        (run_id,),
    ).fetchall()
    return [(float(r[0]), str(r[1]), f"{r[2]} {r[3] or ''}") for r in rows]
