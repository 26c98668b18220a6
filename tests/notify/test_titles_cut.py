"""A title too long for its place is cut at a word and the cut is marked with …: an inbox item's
title (a follow-up question, a run's closing notice, a refusal — whoever posts it), and a
notification's subject."""

from __future__ import annotations

from agentd.db import items as qi
from agentd.models import InboxKind
from agentd.notify import subject
from agentd.text import TITLE_CHARS, cut_at_word
from tests.conftest import Home

WORDS = " ".join(f"word{n:03d}" for n in range(60))  # 479 characters, no word a prefix of another


def whole_words(cut: str) -> bool:
    """Every word of `cut` (before its …) is a whole word of WORDS."""
    return set(cut.removesuffix("…").split()) <= set(WORDS.split())


def test_cut_at_word_keeps_whole_words_and_marks_the_cut() -> None:
    cut = cut_at_word(WORDS, 50)
    assert len(cut) <= 50 and cut.endswith("…") and whole_words(cut)
    assert cut_at_word("short enough", 50) == "short enough"  # nothing cut, nothing marked


def test_cut_at_word_cuts_inside_a_word_only_without_spaces() -> None:
    cut = cut_at_word("x" * 300, 100)
    assert cut == "x" * 99 + "…"


def test_inbox_item_title_is_cut_at_a_word_with_an_ellipsis(home: Home) -> None:
    home.root.mkdir(parents=True)
    goal_id = home.add_goal()
    question = f"Before going on: {WORDS}?"
    item_id = home.store.write(
        lambda c: qi.post(c, InboxKind.QUESTION, title=question, body=question, goal_id=goal_id)
    )
    title = home.store.read(lambda c: qi.get_item(c, item_id)).title
    assert len(title) <= TITLE_CHARS and title.endswith("…")
    assert whole_words(title.removeprefix("Before going on: "))


def test_notification_subject_cuts_the_title_at_a_word() -> None:
    said = subject({"category": "question", "item_id": 8, "title": WORDS})
    title = said.split("): ", 1)[1]
    assert title.endswith("…") and whole_words(title)


def test_notification_subject_of_a_reminder_says_what_then_which_message() -> None:
    said = subject({"category": "approval", "item_id": 8, "stage": 1, "title": "approve restart?"})
    assert said == "agentd approval needed (item 8, reminder 1): approve restart?"
