"""How the list commands print a page (issue 35): the text table with its footer, or --json — the
bare array of rows as before, or with --total one object `{NOUN: rows, "total", "next_after"}`
(NOUN: goals, runs, events, items), the shape `/api/goals` and `/api/inbox` answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from agentd.cli.root import Opt, emit
from agentd.operator import listing

WithTotal = Annotated[
    bool,
    Opt(
        "--total",
        help="With --json: one object {goals|runs|events|items, total, next_after} instead of "
        "the bare array (total: how many match; next_after: the next page's --after, null on "
        "the last page).",
    ),
]


def emit_page(
    as_json: bool, with_total: bool, page: listing.Page[Any], rows: list[Any],
    text: Callable[[], str], noun: str,
) -> None:  # fmt: skip
    """Print `page` (whose rows, as JSON, are `rows`) as --json, --json --total, or text."""
    if as_json and with_total:
        emit(True, {noun: rows, "total": page.total, "next_after": page.next_after}, str)
        return
    emit(as_json, rows, lambda: text() + listing.footer(page, noun))
