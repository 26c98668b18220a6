"""A question withdrawn when the watched service recovers reads `withdrawn` in `inbox list --all`
and `inbox show` (and `status_shown` in --json, its `status` staying `expired`); an item that
got no answer in time still reads `expired`. Real poll, real SQLite file, the real CLI."""

from __future__ import annotations

import json
from typing import Any

from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.cli.test_cli import agentd
from tests.runs.test_question_withdraw import DOWN, UP, poll, waiting_on_question


def withdrawn_question(home: Any) -> int:
    poll(home, DOWN)
    _, item_id = waiting_on_question(home)
    poll(home, UP)  # the recovery withdraws the question
    return item_id


def test_inbox_list_all_shows_a_question_withdrawn_on_recovery_as_withdrawn(home: Any) -> None:
    item_id = withdrawn_question(home)

    text = agentd(home.root, "inbox", "list", "--all").stdout

    row = next(line for line in text.splitlines() if line.startswith(str(item_id)))
    assert row.endswith("withdrawn") and "expired" not in row


def test_inbox_show_brackets_a_withdrawn_question_as_withdrawn(home: Any) -> None:
    item_id = withdrawn_question(home)

    text = agentd(home.root, "inbox", "show", str(item_id)).stdout

    assert f"{item_id}  question  [withdrawn]" in text and "[expired]" not in text


def test_inbox_json_keeps_the_stored_status_and_adds_the_shown_one(home: Any) -> None:
    item_id = withdrawn_question(home)

    listed = json.loads(agentd(home.root, "inbox", "list", "--all", "--json").stdout)
    shown = json.loads(agentd(home.root, "inbox", "show", str(item_id), "--json").stdout)

    (row,) = [x for x in listed if x["item_id"] == item_id]
    for x in (row, shown):
        assert (x["status"], x["status_shown"]) == ("expired", "withdrawn")


def test_an_item_that_got_no_answer_in_time_still_reads_expired(home: Any) -> None:
    poll(home, UP)  # a config and a migrated database
    item_id = home.store.write(lambda c: int(qi.post(c, InboxKind.QUESTION, title="which?")))
    home.store.write(lambda c: qi.resolve(c, item_id, InboxStatus.EXPIRED,
                                          answer="expired: no answer in time"))  # fmt: skip

    text = agentd(home.root, "inbox", "show", str(item_id)).stdout
    listed = json.loads(agentd(home.root, "inbox", "list", "--all", "--json").stdout)

    assert "[expired]" in text and listed[0]["status_shown"] == "expired"
