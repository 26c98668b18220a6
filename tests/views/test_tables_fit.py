"""Tables and views fit the terminal: at COLUMNS=80 the widest free-text column gives up room (cut
with …), a goal's long `why` wraps under its label, and a closed approval has no expiry left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentd.models import Event, Goal, GoalStatus, InboxItem, InboxKind, InboxStatus
from agentd.views import records
from agentd.views.tables import table

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LONG = "Keep the checkout service healthy through the holiday sale and never double-charge"


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def goal(title: str = LONG, why: str = "revenue and trust " * 20) -> Goal:
    return Goal(1, title, why, "default", GoalStatus.ACTIVE, [], None, NOW, NOW)


def test_table_cuts_the_widest_free_column_to_fit_the_width() -> None:
    rows = [(1, "active", LONG, "x" * 40)]
    text = table(("id", "status", "title", "note"), rows, {"title": 60, "note": 50}, width=60)
    assert widest(text) <= 60
    assert "…" in text.splitlines()[1] and text.splitlines()[1].startswith("1   active")


def test_table_without_a_width_keeps_its_caps() -> None:
    rows = [(1, LONG)]
    assert widest(table(("id", "title"), rows, {"title": 60}, width=None)) == 4 + 60


@pytest.fixture
def columns_80(monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "80")


@pytest.mark.usefixtures("columns_80")
def test_goals_table_and_goal_view_fit_80_columns() -> None:
    assert widest(records.goals_table([goal()], NOW)) <= 80
    view = records.goal_view(goal(), [], {"tokens": 0, "tokens_in": 0, "tokens_out": 0}, NOW)
    assert widest(view) <= 80
    assert "revenue and trust" in view.splitlines()[3]  # wrapped, not cut: every word is there
    assert view.count("trust") == 20


@pytest.mark.usefixtures("columns_80")
def test_events_table_fits_80_columns() -> None:
    event = Event(1, "deploy", {"service": "checkout", "notes": "x" * 100}, "deploy-" * 5, NOW)
    assert widest(records.events_table([event], NOW)) <= 80


def item(status: InboxStatus) -> InboxItem:
    return InboxItem(
        7, InboxKind.APPROVAL, status, 1, 2, "approve rollback", "", "rollback", {}, "d", None,
        None, NOW - timedelta(minutes=5), NOW + timedelta(minutes=55), None,
    )  # fmt: skip


def test_a_consumed_approval_shows_no_expiry_in_the_inbox_table() -> None:
    consumed = records.items_table([item(InboxStatus.APPROVED)], NOW, with_status=True)
    assert "55m" not in consumed and "in " not in consumed.splitlines()[1]
    still_open = records.items_table([item(InboxStatus.OPEN)], NOW, with_status=True)
    assert "in 55m" in still_open
