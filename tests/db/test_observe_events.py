"""A run's look at the events (issue 35: the last event id is read first, the events only when it
moved): an event committed between the two reads — PostgreSQL's READ COMMITTED lets another
daemon's land there — is shown once, never again at the next look (the model would see it twice
and might act on it twice), and never skipped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db.store import SyncStore

pytestmark = pytest.mark.backends


class EventBetweenReads:
    """A connection on which an event arrives right after the last event id was read."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.arrived: int | None = None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        cur = self.conn.execute(sql, parameters)
        if "max(event_id)" in sql and self.arrived is None:
            rows = cur.fetchall()
            self.arrived = qi.add_event(self.conn, "late", {}, None)
            return _Rows(rows)
        return cur

    def __getattr__(self, name: str) -> Any:  # dialect, IntegrityError, memo
        return getattr(self.conn, name)


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0]


@pytest.fixture
def store(home: Any) -> SyncStore:
    home.root.mkdir(parents=True, exist_ok=True)
    return home.store  # type: ignore[no-any-return]


def test_an_event_committed_between_the_two_reads_is_shown_once(store: SyncStore) -> None:
    first = store.write(lambda c: qi.add_event(c, "first", {}, None))
    second = store.write(lambda c: qi.add_event(c, "second", {}, None))
    assert first is not None and second is not None

    def look(c: Any) -> tuple[int, list[int], int | None]:
        between = EventBetweenReads(c)
        seen, new = qi.events_since(between, first, 20)
        return seen, [e.event_id for e in new], between.arrived

    seen, shown, late = store.write(look)
    assert late is not None and shown == [second, late]  # listed, not skipped
    assert seen == late  # …and counted as seen: the next look does not show it again
    again, more = store.read(lambda c: qi.events_since(c, seen, 20))
    assert (again, more) == (late, [])


def test_a_first_look_lists_none_and_a_look_with_nothing_new_reads_once(store: SyncStore) -> None:
    only = store.write(lambda c: qi.add_event(c, "only", {}, None))
    assert store.read(lambda c: qi.events_since(c, None, 20)) == (only, [])
    assert store.read(lambda c: qi.events_since(c, only, 20)) == (only, [])
