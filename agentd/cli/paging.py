"""How the list commands print a page (issue 35): the text table with its footer, or --json — the
bare array of rows as before, or with --total one object `{NOUN: rows, "total", "next_after"}`
(NOUN: goals, runs, events, items), the shape `/api/goals` and `/api/inbox` answer.

--json streams: the rows are written as they are read (agentd/operator/listing.py's `Stream`),
a few hundred at a time, into the same bytes `json.dumps(…, indent=2)` of the whole list gives —
so the first rows are out at once and memory stays flat at 100,000 rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from agentd.cli.root import Opt, emit
from agentd.operator import listing
from agentd.text import to_json

WithTotal = Annotated[
    bool,
    Opt(
        "--total",
        help="With --json: one object {goals|runs|events|items, total, next_after} instead of "
        "the bare array (total: how many match; next_after: the next page's --after, null on "
        "the last page).",
    ),
]
FLUSH_EVERY = 200  # rows written to stdout at once


def emit_page(
    as_json: bool, with_total: bool, page: listing.Page[Any], rows: list[Any],
    text: Callable[[], str], noun: str,
) -> None:  # fmt: skip
    """Print `page` (whose rows, as JSON, are `rows`) as --json, --json --total, or text."""
    if as_json and with_total:
        emit(True, {noun: rows, "total": page.total, "next_after": page.next_after}, str)
        return
    emit(as_json, rows, lambda: text() + listing.footer(page, noun))


def json_array(rows: Iterable[Any], depth: int, write: Callable[[str], None]) -> None:
    """`rows` as the JSON array `to_json` (indent 2) writes at nesting `depth`, FLUSH_EVERY rows
    at a time: each batch dumped as an array, its brackets cut and its lines indented."""
    pad = "  " * depth
    first = True
    batch: list[Any] = []

    def flush() -> None:
        nonlocal first
        body = to_json(batch)[2:-2]  # "[\n  {…},\n  {…}\n]": the rows' lines, indented once
        if pad:
            body = pad + body.replace("\n", "\n" + pad)
        write(("[\n" if first else ",\n") + body)
        first = False
        batch.clear()

    for row in rows:
        batch.append(row)
        if len(batch) >= FLUSH_EVERY:
            flush()
    if batch:
        flush()
    write("[]" if first else "\n" + pad + "]")


def stream_json(
    stream: listing.Stream, noun: str, with_total: bool, row: Callable[[Any], Any] = lambda r: r
) -> None:
    """Print `stream`'s rows (each as `row` makes it) as --json does, written as they are read:
    the bare array, or with `with_total` the object {NOUN: […], "total", "next_after"}."""

    def write(text: str) -> None:
        typer.echo(text, nl=False)  # click flushes each piece: the first rows are out at once

    rows = (row(r) for r in stream)
    if not with_total:
        json_array(rows, 0, write)
        write("\n")
        return
    write("{\n" + f"  {to_json(noun)}: ")
    json_array(rows, 1, write)
    write(
        f',\n  "total": {to_json(stream.total)},\n  "next_after": {to_json(stream.next_after)}\n}}\n'
    )
