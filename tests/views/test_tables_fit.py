"""Tables and views fit the terminal: at COLUMNS=80 the widest free-text column gives up room (cut
with …), a goal's long `why` wraps under its label, and a closed approval has no expiry left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentd.models import Event, Goal, GoalStatus, InboxItem, InboxKind, InboxStatus
from agentd.views import records
from agentd.views.tables import table
from tests.cli.test_cli import agentd, cli_home

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
cli_home = cli_home  # the fixture: a valid config and a migrated database
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
    cut = table(("id", "title"), rows, {"title": 60}, width=None).splitlines()[1][4:]
    assert 50 < len(cut) <= 60 and cut.endswith("…")  # the cap, less the word it would split
    assert LONG.startswith(cut[:-1]) and LONG[len(cut) - 1] == " "  # cut at a word


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


# ── the commands that print runs: `runs list`, `goal show`, `status` (real rows, real CLI) ────

TRIGGER = "state:health.unhealthy"  # the longest trigger a watched source writes
SUMMARY = "Unhealthy checkout: restarted twice, then asked to roll back the 14:02 deploy"
WHY = (
    "every 4h from the last check-in at Tue Dec 1 08:00 CET, incl. 12 min jitter, then moved "
    "out of the quiet hours 22:00-08:00 Europe/Berlin to their end"
)


@pytest.fixture
def busy_home(cli_home: Any) -> Any:
    """A goal with a long title, a waiting run started by a watched source (long trigger and
    summary), a finished one by the operator, and a planned check-in with a long reason."""
    from agentd.db import checkins as qc
    from agentd.db import queries as q

    def arrange(c: Any) -> None:
        goal_id = q.add_goal(
            c, title=LONG, why="tests", agent="default", criteria=[], deadline=None
        )
        for trigger, status in ((TRIGGER, "waiting"), ("operator", "succeeded")):
            run_id = q.create_run(c, goal_id=goal_id, agent="default", trigger=trigger)
            wait = (
                '{"kind": "inbox", "item_id": 41, "why": "approval"}'
                if status == "waiting"
                else None
            )
            c.execute("UPDATE runs SET status = ?, summary = ?, wait = ?"
                      " WHERE run_id = ?", (status, SUMMARY, wait, run_id))  # fmt: skip
        qc.set_next(c, goal_id, NOW.timestamp() + 3600, WHY, NOW.timestamp())

    cli_home.store.write(arrange)
    return cli_home


def shown(home: Any, *args: str) -> str:
    result = agentd(home.root, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


COMMANDS = [("runs", "list"), ("goal", "show", "1"), ("status",)]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_runs_tables_fit_the_terminal(
    busy_home: Any, monkeypatch: Any, columns: int, command: tuple[str, ...]
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    text = shown(busy_home, *command)
    assert widest(text) <= columns, text
    # The summary stays readable: at least its first words, whatever else gives way.
    assert "Unhealthy checkout" in text and "Unhealthy checkout: res…" not in text  # at a word


@pytest.mark.usefixtures("columns_80")
def test_runs_list_at_80_columns_drops_the_trigger_rather_than_cut_it(busy_home: Any) -> None:
    text = shown(busy_home, "runs", "list")
    assert "state:h" not in text and "TRIGGER" not in text and "STEPS" not in text
    assert "inbox item 41 (approval)" in text  # what the waiting run needs, in full


def test_runs_list_at_120_columns_shows_every_column_and_the_whole_trigger(
    busy_home: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    text = shown(busy_home, "runs", "list")
    assert TRIGGER in text and "STEPS" in text and "operator" in text


@pytest.mark.usefixtures("columns_80")
def test_status_wraps_the_next_check_ins_reason_as_goal_show_does(busy_home: Any) -> None:
    text = shown(busy_home, "status")
    assert widest(text) <= 80
    words = " ".join(text[text.index("why: ") :].split()).removeprefix("why: ")
    assert words.startswith(WHY)  # wrapped, every word kept


# ── goal show's outlook and status's failing check-ins (views over their plain data) ────────

T = NOW.timestamp()
CHECKIN = {
    "checkin_id": 123, "goal_id": 12, "schedule_id": 3, "due_at": T - 3600, "status": "completed",
    "model": "anthropic:claude-sonnet-4-5", "tokens_in": 1234, "tokens_out": 321,
    "verdict": {"kind": "nudge", "topic": "The 14:02 deploy looks related: roll it back?"},
    "effect": {"item_id": 44}, "reason": "", "reasons": [],
}  # fmt: skip
SCHEDULE = {
    "schedule_id": 2, "kind": "cron", "spec": "0 9 * * mon-fri", "tz": "Europe/Berlin",
    "misfire": "all", "misfire_cap": 3, "max_lateness_s": 3600, "next_fire_at": T + 7200,
    "goal_jitter_s": 600, "error": None,
}  # fmt: skip
FAILING = {
    "goal_id": 12, "in_a_row": 3, "since": NOW - timedelta(hours=8), "title": LONG,
    "last_error": "model default: HTTP 529 overloaded (anthropic); retried 3 times, next in 10m",
}  # fmt: skip


@pytest.mark.parametrize("columns", [80, 120])
def test_outlook_tables_fit_and_keep_their_main_column(monkeypatch: Any, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    checkins = records.outer.checkins_table([CHECKIN], T)
    schedules = records.outer.schedules_table({"now": T, "schedules": [SCHEDULE]})
    assert widest(checkins) <= columns and widest(schedules) <= columns
    assert "nudge → item 44: The 14:02" in checkins and "dep…" not in checkins  # at a word
    assert "anthrop…" not in checkins  # the model is whole or not there
    assert "0 9 * * mon-fri" in schedules and "(in 2h)" in schedules


@pytest.mark.parametrize("columns", [80, 120])
def test_failing_check_ins_fit_and_keep_the_error_readable(monkeypatch: Any, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    text = records.failing_text({"now": NOW, "failing_checkins": [FAILING], "failing_goals": 1})
    assert widest(text) <= columns, text  # the table and the hint below it
    assert "model default: HTTP 529 overloaded" in text
