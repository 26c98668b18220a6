"""The home-wide figures of `GET /metrics` on both engines: one live daemon per home exports them
(the first by name; a stopped or silent one never), and the grouped counts read what the tables
hold — runs by status and agent, open items by kind, the oldest approval, nudges by outcome."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import leases
from agentd.db import metrics as qm
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus

pytestmark = pytest.mark.backends


@pytest.fixture
def store(home: Any) -> SyncStore:
    home.root.mkdir(parents=True, exist_ok=True)
    return home.store  # type: ignore[no-any-return]


def _register(store: SyncStore, owner: str) -> None:
    store.write(lambda c: leases.register(c, owner=owner, host="h", pid=1, version="t", lease_s=30))


def test_home_figures_are_exported_by_one_live_daemon(store: SyncStore) -> None:
    assert store.read(lambda c: qm.exporter(c, "anyone"))  # none registered: this one
    for owner in ("b-daemon", "a-daemon", "c-daemon"):
        _register(store, owner)
    chosen = [
        o
        for o in ("a-daemon", "b-daemon", "c-daemon")
        if store.read(lambda c, o=o: qm.exporter(c, o))
    ]
    assert chosen == ["a-daemon"]
    store.write(lambda c: leases.stopped(c, "a-daemon", release=False))
    chosen = [
        o
        for o in ("a-daemon", "b-daemon", "c-daemon")
        if store.read(lambda c, o=o: qm.exporter(c, o))
    ]
    assert chosen == ["b-daemon"]


def test_home_figures_count_runs_items_and_nudges(store: SyncStore) -> None:
    def arrange(c: Any) -> None:
        goal = q.add_goal(c, title="t", why="w", agent="ops", criteria=[], deadline=None)
        for _ in range(3):
            q.create_run(c, goal_id=goal, agent="ops", trigger="test")
        qi.post(c, InboxKind.APPROVAL, title="a", goal_id=goal)
        for status in (InboxStatus.DISMISSED, InboxStatus.DISMISSED, None):
            item = qi.post(c, InboxKind.NOTICE, title="n", goal_id=goal, rule="nudge")
            if status is not None:
                qi.resolve(c, item, status)

    store.write(arrange)
    f = store.read(qm.home)
    assert ("running", "ops", 3) in f["runs"]
    assert dict(f["inbox"]) == {"approval": 1, "notice": 1}
    assert f["approval_oldest_s"] is not None and f["approval_oldest_s"] >= 0
    assert sorted(f["nudges"]) == [("ops", "dismissed", 2), ("ops", "open", 1)]
