"""The nudge queries `status` runs at every call read the nudges through their own index
(`inbox_nudges`, migration 9) and count in the database: a goal is called out only past half of
at least three settled nudges dismissed, on both engines."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import metrics as qm
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus
from agentd.operator import nudges

pytestmark = pytest.mark.backends
D, A = InboxStatus.DISMISSED, InboxStatus.ANSWERED


@pytest.fixture
def store(home: Any) -> SyncStore:
    home.root.mkdir(parents=True, exist_ok=True)
    return home.store  # type: ignore[no-any-return]


def _goals(store: SyncStore) -> dict[str, int]:
    """Goals nudged: 3 of 4 settled dismissed (+1 open), 2 of 4 (half: no), 2 of 2 (too few)."""
    plans = {"noisy": [D, D, D, A, None], "half": [D, D, A, A], "few": [D, D]}

    def arrange(c: Any) -> dict[str, int]:
        ids = {}
        for name, outcomes in plans.items():
            goal = ids[name] = q.add_goal(c, title=name, why="w", agent="ops", criteria=[],
                                          deadline=None)  # fmt: skip
            qi.post(c, InboxKind.NOTICE, title="not a nudge", goal_id=goal, rule="other")
            for status in outcomes:
                item = qi.post(c, InboxKind.QUESTION, title="n", goal_id=goal, rule="nudge")
                if status is not None:
                    qi.resolve(c, item, status)
        return ids

    return store.write(arrange)


def test_status_calls_out_only_goals_mostly_dismissed(store: SyncStore) -> None:
    ids = _goals(store)
    flagged = store.read(nudges.mostly_dismissed)
    assert flagged == [{"goal_id": ids["noisy"], "title": "noisy", "dismissed": 3, "nudges": 5,
                        "dismissed_share": 0.75, "backoff_steps": 0}]  # fmt: skip
    report = {e["goal_id"]: e["mostly_dismissed"] for e in store.read(nudges.report)}
    assert report == {ids["noisy"]: True, ids["half"]: False, ids["few"]: False}  # the same verdict


def test_the_nudge_queries_use_the_nudge_index(store: SyncStore) -> None:
    _goals(store)
    if store.backend.shared:  # PostgreSQL plans a tiny table as a scan: the index must exist
        names = store.read(lambda c: [r[0] for r in c.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'inbox'").fetchall()])  # fmt: skip
        assert "inbox_nudges" in names
        return

    def plan(c: Any, sql: str, args: tuple[Any, ...] = ()) -> str:
        return " ".join(str(tuple(r)) for r in c.execute(f"EXPLAIN QUERY PLAN {sql}", args))

    seen: list[tuple[str, tuple[Any, ...]]] = []

    class Spy:
        def __init__(self, c: Any) -> None:
            self.c, self.dialect = c, c.dialect

        def execute(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
            seen.append((sql, args))
            return self.c.execute(sql, args)

    store.read(lambda c: (qm.nudge_rows(Spy(c)), qm.dismissed_goals(Spy(c), 3, 0.5)))  # type: ignore[arg-type]
    assert len(seen) == 2
    for sql, args in seen:
        assert "inbox_nudges" in store.read(lambda c, s=sql, a=args: plan(c, s, a)), sql
