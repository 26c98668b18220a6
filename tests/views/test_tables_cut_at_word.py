"""CLI tables cut a long title at a word and mark the cut (`text.one_line`, which every table
column and the web's goal names use), as inbox titles and notification subjects are cut."""

from __future__ import annotations

from typing import Any

from agentd.text import one_line
from tests.cli.test_cli import agentd
from tests.conftest import Home

TITLE = "Keep the checkout service healthy through the holiday sale and never double-charge anyone"


def test_one_line_cuts_at_a_word() -> None:
    assert one_line(TITLE, 24) == "Keep the checkout…"
    assert one_line("x" * 80, 10) == "x" * 9 + "…"  # no space to cut at: inside the word
    assert one_line(TITLE, 200) == TITLE


def test_goal_list_at_80_columns_cuts_the_title_at_a_word(home: Home, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    home.root.mkdir(parents=True)
    home.add_goal(title=TITLE)
    text = agentd(home.root, "goal", "list").stdout
    [row] = [ln for ln in text.splitlines() if "Keep the" in ln]
    shown = row[row.index("Keep the") :].split("…")[0]
    assert "…" in row and TITLE.startswith(shown) and TITLE[len(shown)] == " ", row
