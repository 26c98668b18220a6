"""`inbox list --status withdrawn` (and the web inbox's status=withdrawn) shows the items every
surface shows as withdrawn — expired because no one needed them any more, not timed out — and
`inbox list` reads from the database only the status it shows, not every item ever posted.
The CLI and the web inbox narrow through one filter (agentd/operator/inbox.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import pages
from agentd.models import InboxKind, InboxStatus
from agentd.operator import inbox
from agentd.views.inbox_status import TIMED_OUT
from agentd.web.inbox_page import Filters
from tests.cli.test_inbox_filters_watch import arranged, listed
from tests.conftest import Home


def closed_two_ways(home: Home) -> tuple[int, int]:
    def post(c: Any) -> tuple[int, int]:
        gone = qi.post(c, InboxKind.APPROVAL, title="restart?", goal_id=1)
        late = qi.post(c, InboxKind.QUESTION, title="region?", goal_id=1)
        qi.resolve(c, gone, InboxStatus.EXPIRED, answer="withdrawn: the service recovered")
        qi.resolve(c, late, InboxStatus.EXPIRED, answer=f"{TIMED_OUT} no answer in 1h")
        return gone, late

    return home.store.write(post)


def test_status_withdrawn_lists_the_withdrawn_items_only(home: Home) -> None:
    arranged(home)
    gone, late = closed_two_ways(home)
    assert listed(home, "--status", "withdrawn") == [gone]
    assert listed(home, "--status", "expired") == [gone, late]  # the stored status: both


def test_the_web_inbox_narrows_as_the_cli_does(home: Home) -> None:
    ids = arranged(home)
    gone, _ = closed_two_ways(home)
    shown = inbox.filtered(home.store, Filters.parse({"status": "withdrawn"}).shared)
    assert [i.item_id for i in shown] == [gone]
    web = Filters.parse({"kind": "notice", "goal": "2"})
    assert [i.item_id for i in inbox.filtered(home.store, web.shared)] == [ids["nudge"]]


def test_inbox_list_reads_only_the_status_it_shows(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    arranged(home)
    asked: list[str | None] = []
    real = pages.count  # a page's and a stream's first read (--json streams)

    def spy(c: Any, t: pages.Table, filters: dict[str, Any]) -> Any:
        asked.append(filters.get("status"))
        return real(c, t, filters)

    monkeypatch.setattr(pages, "count", spy)
    listed(home)
    listed(home, "--status", "answered")
    assert asked == ["open", "answered"]
