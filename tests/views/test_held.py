"""The held-by-quiet-hours sentence `agentd status` and the web inbox share (agentd.views.held):
each held item counted once across channels, different ends each said, past ends said due."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.views.held import held_summary, late_summary

NOW = datetime(2026, 12, 1, 22, 34, tzinfo=UTC)  # 23:34 CET
BERLIN_8 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC).timestamp()
NEW_YORK_7 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()  # 07:00 EST


def channel(*held: dict[str, Any], late: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"pending": len(held), "held": len(held), "held_items": list(held), "late": late or []}


def entry(item_id: int, category: str, until: float, tz: str, stage: int = 0) -> dict[str, Any]:
    return {"item_id": item_id, "category": category, "stage": stage, "until": until, "tz": tz}


def test_held_summary_counts_an_item_on_two_channels_once() -> None:
    nudge = entry(9, "nudge", BERLIN_8, "Europe/Berlin")
    health = {"ops": channel(nudge, entry(12, "notice", BERLIN_8, "Europe/Berlin")),
              "mail": channel(nudge)}  # fmt: skip
    assert held_summary(health, NOW) == "2 held by quiet hours until 08:00 CET (nudge 9, notice 12)"


def test_held_summary_says_each_end_and_the_reminder_stage() -> None:
    health = {"ops": channel(entry(9, "nudge", BERLIN_8, "Europe/Berlin"),
                             entry(5, "approval", NEW_YORK_7, "America/New_York", stage=1))}  # fmt: skip
    assert held_summary(health, NOW) == (
        "2 held by quiet hours: 1 until 08:00 CET, 1 until 07:00 EST "
        "(nudge 9, approval 5 (reminder 1))"
    )


def test_held_summary_says_an_end_past_is_due_and_nothing_held_is_none() -> None:
    later = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    health = {"ops": channel(entry(9, "nudge", BERLIN_8, "Europe/Berlin"))}
    assert held_summary(health, later) == "1 held by quiet hours until 08:00 CET, due now (nudge 9)"
    assert held_summary({"ops": channel()}, NOW) is None
    assert late_summary({"ops": channel()}, NOW) is None


def test_held_summary_names_a_few_and_counts_the_rest() -> None:
    many = [entry(n, "nudge", BERLIN_8, "Europe/Berlin") for n in range(1, 8)]
    text = held_summary({"ops": channel(*many)}, NOW)
    assert (
        text == "7 held by quiet hours until 08:00 CET (nudge 1, nudge 2, nudge 3, nudge 4, 3 more)"
    )


def test_late_summary_names_the_page_and_both_times() -> None:
    late = [{"item_id": 5, "category": "approval", "next_at": BERLIN_8 + 600,
             "expires_at": BERLIN_8, "tz": "Europe/Berlin"}]  # fmt: skip
    assert late_summary({"ops": channel(late=late)}, NOW) == (
        "approval 5 will be late: its next try 08:10 CET is after it expires at 08:00 CET"
    )
