"""--json of the list commands streams (issue 35): the rows are written as they are read, a few
hundred at a time, into the very bytes the whole list dumped at once gave (bare --json an array,
--json --total the object) — so scripts read the same, memory stays flat and the first rows are
out before the last are read."""

from __future__ import annotations

import json
from typing import Any

import pytest
import typer

from agentd.cli import paging
from agentd.db import queries as q
from agentd.operator import inbox, listing
from agentd.text import jsonable, to_json
from agentd.views.inbox_status import shown_status
from tests.cli.test_paging import CONFIG, REPLIES, agentd, filled  # noqa: F401

PAGES = {
    "goal": (["goal", "list"], "goals", lambda s, a, n: listing.goals(s, None, a, n)),
    "runs": (["runs", "list"], "runs", lambda s, a, n: listing.runs(s, None, None, a, n or 50)),
    "event": (["event", "list"], "events", lambda s, a, n: listing.events(s, a, n or 50)),
    "inbox": (["inbox", "list"], "items",
              lambda s, a, n: listing.items(s, inbox.Filter(), a, n)),
}  # fmt: skip


def before(store: Any, which: str, after: int | None, limit: int | None, total: bool) -> str:
    """What the command printed before it streamed: the whole page dumped at once."""
    _, noun, read = PAGES[which]
    page = read(store, after, limit)
    rows: list[Any] = page.rows
    if which == "inbox":
        rows = [{**jsonable(i), "status_shown": shown_status(i)} for i in rows]
    if total:
        return to_json({noun: rows, "total": page.total, "next_after": page.next_after}) + "\n"
    return to_json(rows) + "\n"


@pytest.mark.parametrize("which", list(PAGES))
@pytest.mark.parametrize("total", [False, True])
def test_streamed_json_is_byte_identical_to_the_whole_dump(
    filled: Any,  # noqa: F811
    which: str,
    total: bool,
) -> None:
    command = PAGES[which][0]
    flag = ["--total"] if total else []
    for after, limit in ((None, None), (None, 10), (5, 7), (None, 23), (None, 1), (40, 5)):
        args = [*(["--after", str(after)] if after else []), *(["--limit", str(limit)] if limit
                                                              else [])]  # fmt: skip
        out = agentd(filled.root, *command, *args, "--json", *flag).stdout
        assert out == before(filled.store, which, after, limit, total), (args, out[:300])


@pytest.mark.parametrize("total", [False, True])
def test_an_empty_list_is_as_before(home: Any, total: bool) -> None:
    home.write_config(CONFIG, REPLIES)
    home.store  # noqa: B018  # migrated
    for which, (command, _, _) in PAGES.items():
        out = agentd(home.root, *command, "--json", *(["--total"] if total else [])).stdout
        assert out == before(home.store, which, None, None, total)


def test_a_long_list_is_written_while_it_is_read(
    home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,500 goals: more than one read's worth. The output is valid JSON with every goal once,
    the first rows are written before the last read, and no read holds more than CHUNK rows."""
    home.write_config(CONFIG, REPLIES)

    def add(c: Any) -> None:
        for n in range(2500):
            q.add_goal(c, title=f"goal {n}", why="stream", agent="default", criteria=[],
                       deadline=None)  # fmt: skip

    home.store.write(add)
    order: list[tuple[str, int]] = []
    read = listing.Stream._read

    def traced(self: listing.Stream, after: int | None, n: int) -> list[Any]:
        rows = read(self, after, n)
        order.append(("read", len(rows)))
        return rows

    echo = typer.echo

    def written(message: Any = None, **kw: Any) -> None:
        order.append(("write", len(str(message))))
        echo(message, **kw)

    monkeypatch.setattr(listing.Stream, "_read", traced)
    monkeypatch.setattr(paging.typer, "echo", written)
    for flag in ([], ["--total"]):
        order.clear()
        out = json.loads(agentd(home.root, "goal", "list", "--json", *flag).stdout)
        rows = out["goals"] if flag else out
        assert [g["goal_id"] for g in rows] == list(range(1, 2501))
        if flag:
            assert (out["total"], out["next_after"]) == (2500, None)
        reads = [i for i, (what, _) in enumerate(order) if what == "read"]
        writes = [i for i, (what, _) in enumerate(order) if what == "write"]
        assert len(reads) >= 3 and writes[0] < reads[-1], order  # written as it is read
        assert max(n for what, n in order if what == "read") <= listing.CHUNK


def test_rows_added_while_it_is_written_are_not_in_it(
    home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's bound is read with its total: a goal added between two reads is left for
    the next listing (the total and the rows agree)."""
    home.write_config(CONFIG, REPLIES)
    add = lambda c: q.add_goal(c, title="g", why="w", agent="default", criteria=[],  # noqa: E731
                               deadline=None)  # fmt: skip
    home.store.write(lambda c: [add(c) for _ in range(3)])
    monkeypatch.setattr(listing, "FIRST_CHUNK", 1)
    monkeypatch.setattr(listing, "CHUNK", 1)  # a read per row
    stream = listing.goal_stream(home.store, None, None, None)
    rows = iter(stream)
    first = next(rows)
    home.store.write(add)
    assert [first.goal_id, *(g.goal_id for g in rows)] == [1, 2, 3] and stream.total == 3
