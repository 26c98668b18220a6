"""`agentd status` at any size (issue 35): it plans only the first goals of each due-time index
(no statement reads the goals, cadences, schedules or check-ins whole) and still lists the
soonest check-ins; it says how far a daemon's first planning has got."""

from __future__ import annotations

import json
import time
from typing import Any

from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import checkins as qc
from agentd.db import meta
from agentd.db import queries as q
from agentd.db.glance import PLANNING_KEY
from agentd.operator import overview

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
jitter_s = 0
"""
REPLIES = [{"reason": "ok", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}]
WHOLE = ("SCAN goals", "SCAN g", "SCAN cadences", "SCAN k", "SCAN schedules", "SCAN s",
         "SCAN checkins", "SCAN x")  # fmt: skip


def test_status_plans_candidates_only_and_lists_the_soonest(home: Any) -> None:
    cfg = home.write_config(CONFIG, REPLIES)
    now = time.time()

    def fill(c: Any) -> None:
        for n in range(400):  # looks from 30 h out down to 10 h: the last goals come first
            g = q.add_goal(c, title=f"goal {n}", why="scale", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            qc.set_next(c, g, now + 36_000 + (400 - n) * 180, "a look", now)

    home.store.write(fill)
    sql: list[str] = []
    conn = home.store.conn
    conn.set_trace_callback(sql.append)
    try:
        data = overview.at_a_glance(home.store, now, cfg)
    finally:
        conn.set_trace_callback(None)
    assert [x["goal_id"] for x in data["next_checkins"]] == [400, 399, 398, 397, 396]
    assert len(sql) < 400, len(sql)  # fewer statements than goals: candidates only are planned
    plans = [f"{s[:70]}: {r[3]}" for s in sql if s.lstrip().upper().startswith("SELECT")
             for r in conn.execute("EXPLAIN QUERY PLAN " + s)]  # fmt: skip
    whole = [p for p in plans if any(p.endswith(": " + w) for w in WHOLE)]
    assert not whole, "\n".join(whole)


def test_status_says_how_far_planning_has_got(home: Any) -> None:
    home.write_config(CONFIG, REPLIES)
    home.store.write(lambda c: meta.set_meta(c, PLANNING_KEY, "40000 100000 0"))
    result = CliRunner().invoke(app, ["--home", str(home.root), "status"])
    assert result.exit_code == 0, result.output
    assert "planning: 40,000 of 100,000 goals read so far" in result.stdout
    as_json = CliRunner().invoke(app, ["--home", str(home.root), "status", "--json"])
    assert json.loads(as_json.stdout)["planning"] == {"read": 40000, "of": 100000}
    home.store.write(lambda c: meta.set_meta(c, PLANNING_KEY, "100000 100000 1"))
    done = CliRunner().invoke(app, ["--home", str(home.root), "status", "--json"])
    assert json.loads(done.stdout)["planning"] is None
