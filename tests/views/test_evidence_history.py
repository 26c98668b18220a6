"""The evidence summary's "last healthy": the time of the agent's last look that saw a failing
source healthy, read from the world's history (agentd/operator/evidence.py) into the summary
(agentd/views/evidence.py), and said by the CLI's lines and the notification's brief."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agentd.db import items as qi
from agentd.db import meta, stamp
from agentd.db.conn import Conn
from agentd.models import JSON, InboxKind
from agentd.operator import evidence as item_evidence
from agentd.runs.control import record_world
from agentd.views import evidence as ev
from tests.conftest import Home

NOW = datetime(2026, 12, 2, 12, 40, tzinfo=UTC)
T0 = NOW.timestamp() - 300  # the first look: five minutes before NOW
UP = {"ok": True, "status": 200}
DOWN = {"ok": False, "status": 503, "body": "pool exhausted"}


def look(c: Conn, raw: JSON, at: float) -> JSON:
    """One look of the agent `default` at `at`: the home's clock stopped there (stamp.py reads
    it), so the snapshot is taken at `at` and its history counts from `at`."""
    meta.set_meta(c, stamp.KEY, json.dumps({"speed": 0.0, "wall0": 0.0, "sim0": at}))
    world = record_world(c, "default", None, {"checkout": raw}, at)[1]
    meta.set_meta(c, stamp.KEY, "")
    return world


def approval_on(home: Home, raws: list[JSON], item_at: int, **kw: Any) -> JSON | None:
    """Looks one minute apart from T0; an approval raised with the world of look `item_at`."""
    home.root.mkdir(parents=True)
    run_id = home.start_run(home.add_goal())
    worlds = home.store.write(lambda c: [look(c, raw, T0 + 60 * n) for n, raw in enumerate(raws)])
    item_id = home.store.write(lambda c: qi.post(
        c, InboxKind.APPROVAL, title="approve restart?", run_id=run_id,
        data={"world": worlds[item_at]}, **kw))  # fmt: skip
    item = home.store.read(lambda c: qi.get_item(c, item_id))
    return item_evidence.of_item(home.store, item)


def test_evidence_last_healthy_look_is_read_from_the_world_history(home: Home) -> None:
    # up, up, down, down (the approval's world), then up again after the approval.
    evidence = approval_on(home, [UP, UP, DOWN, DOWN, UP], item_at=3)
    assert evidence is not None
    (source,) = evidence["sources"]
    assert source["healthy_until"] == "2026-12-02T12:36:00Z"  # the second look, not the last
    assert "healthy before then" not in source["facts"]
    text = "\n".join(ev.lines(evidence, NOW, 100))
    assert "FAILING since Dec 2 12:37:00 UTC (3m ago) · HTTP 503 · 2 looks in a row" in text
    assert "healthy until Dec 2 12:36:00 UTC (4m ago)" in text


def test_evidence_never_healthy_in_the_history_says_so(home: Home) -> None:
    evidence = approval_on(home, [DOWN, DOWN], item_at=1)
    assert evidence is not None
    (source,) = evidence["sources"]
    assert source["healthy_until"] is None and source["facts"][-1] == "never seen healthy"


def test_evidence_brief_says_the_last_healthy_time_without_world_text() -> None:
    world = {"checkout": {**DOWN, "since": "2026-12-02T12:37:00Z", "streak": 2, "episode": 2}}
    summary = ev.summary(world, (), {"checkout": "2026-12-02T12:36:00Z"})
    (brief,) = ev.brief_lines(summary)
    assert brief == (
        "checkout: FAILING since Dec 2 12:37:00 UTC · HTTP 503 · 2 looks in a row"
        " · healthy until Dec 2 12:36:00 UTC"
    )
    assert "pool" not in brief and "ago" not in brief  # no world text, no time relative to now


def test_evidence_broken_check_says_when_it_was_last_seen_healthy() -> None:
    world = {"checkout": {"ok": False, "check_failed": True, "error": "no such host",
                          "since": "2026-12-02T12:37:00Z", "last_healthy": True}}  # fmt: skip
    (source,) = ev.summary(world, (), {"checkout": "2026-12-02T12:36:00Z"})["sources"]
    parts = ev.headline_parts(source, None)
    assert parts[1:] == ["last seen healthy Dec 2 12:36:00 UTC"]  # in place of "healthy before"
