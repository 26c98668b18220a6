"""`claim_free` takes at most `limit` runs. On PostgreSQL, `UPDATE … WHERE run_id IN (SELECT … LIMIT ?
FOR UPDATE SKIP LOCKED)` may be planned as a semi join that runs the subquery once per row (a
young table's statistics invite it), and the LIMIT then bounded nothing: in the outage bench one
of two daemons took all 40 runs with max_concurrent_runs = 20."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import leases
from agentd.db import queries as q

pytestmark = pytest.mark.backends


def test_claim_free_takes_no_more_than_its_limit(home: Any) -> None:
    def runs(c: Any) -> list[int]:
        made = []
        for i in range(9):
            goal = q.add_goal(c, title=f"g{i}", why="w", agent="a", criteria=[], deadline=None)
            made.append(q.create_run(c, goal_id=goal, agent="a", trigger="cli"))
        return made

    home.root.mkdir(parents=True, exist_ok=True)
    made = home.store.write(runs)
    for lapsed in (False, True):
        taken = home.store.write(
            lambda c, lapsed=lapsed: leases.claim_free(c, f"A{lapsed}", 30, lapsed=lapsed, limit=3)
        )
        assert len(taken) == 3, taken
    rest = home.store.write(lambda c: leases.claim_free(c, "B", 30, lapsed=True, limit=100))
    assert sorted(r for r, _ in rest) == made[6:]  # oldest first; none taken twice
