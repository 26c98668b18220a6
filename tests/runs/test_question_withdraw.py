"""A question a run asked during an outage is withdrawn when the service recovers, as an approval
is: the poll that sees the flip to healthy expires the question and wakes the run (one
transaction, `watching.record_poll`, against a real SQLite file)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from agentd.daemon import watching
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import InboxKind, InboxStatus, RunStatus

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["ask", "finish"]
"""
DOWN = {"health": {"ok": False, "status": 500}}
UP = {"health": {"ok": True, "status": 200}}


def waiting_on_question(home: Any) -> tuple[int, int]:
    """A run of the default agent parked on an open question, asked while the service is down."""
    run_id = home.start_run(home.add_goal())

    def park(c: Any) -> int:
        item_id = int(qi.post(c, InboxKind.QUESTION, title="rollback refused; what now?",
                              run_id=run_id))  # fmt: skip
        wait = {"kind": "inbox", "item_id": item_id, "why": "question"}
        c.execute("UPDATE runs SET status = 'waiting', wait = ? WHERE run_id = ?",
                  (json.dumps(wait), run_id))  # fmt: skip
        return item_id

    return run_id, home.store.write(park)


def poll(home: Any, raw: Any) -> list[tuple[int, int]]:
    if not home.paths.config.exists():
        home.write_config(CONFIG, [])
    return home.store.write(
        lambda c: watching.record_poll(c, "default", raw, "test", time.time(), wake_runs=True)
    )


def test_a_question_asked_during_an_outage_is_withdrawn_when_the_service_recovers(
    home: Any,
) -> None:
    poll(home, DOWN)
    run_id, item_id = waiting_on_question(home)

    woken = poll(home, UP)

    item = home.store.read(lambda c: qi.get_item(c, item_id))
    assert item.status == InboxStatus.EXPIRED
    assert item.answer == "withdrawn: health became healthy"
    assert [r for r, _ in woken] == [run_id]
    assert home.store.read(lambda c: q.get_run(c, run_id)).status == RunStatus.RUNNING


def test_a_question_stays_open_while_the_service_goes_down(home: Any) -> None:
    poll(home, UP)
    run_id, item_id = waiting_on_question(home)

    assert poll(home, DOWN) == []

    assert home.store.read(lambda c: qi.get_item(c, item_id)).status == InboxStatus.OPEN
    assert home.store.read(lambda c: q.get_run(c, run_id)).status == RunStatus.WAITING
