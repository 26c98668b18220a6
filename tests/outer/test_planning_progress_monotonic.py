"""`agentd status`'s "planning: N of M goals" never goes back with two daemons (issue 35): each
sweeps with a cursor of its own and writes its progress to the `outer_planning` row, which keeps
the furthest — goals read never go back for the same total, done stays done for as many goals;
a sweep over more goals (goals added, then a reload) shows again; a done sweep clears a row left
by a daemon that stopped halfway. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from agentd.db import glance
from tests.conftest import Home

pytestmark = pytest.mark.backends


def test_the_planning_row_keeps_the_furthest_progress(home: Home) -> None:
    home.root.mkdir(parents=True)
    shown = []
    for read, total, done in [
        (500, 1000, False),  # daemon A
        (200, 1000, False),  # daemon B, behind it: not shown
        (900, 1000, False),  # B ahead
        (600, 1000, False),  # A behind
        (1000, 1000, True),  # B done
        (700, 1000, False),  # A not yet: done stays
        (100, 1200, False),  # a sweep over more goals shows
        (50, 900, True),  # done over fewer goals (some pruned) clears a row left halfway
    ]:
        home.store.write(lambda c, r=read, t=total, d=done: glance.note_planning(c, r, t, d))
        shown.append(home.store.read(glance.planning))
    assert shown == [
        {"read": 500, "of": 1000}, {"read": 500, "of": 1000}, {"read": 900, "of": 1000},
        {"read": 900, "of": 1000}, None, None, {"read": 100, "of": 1200}, None,
    ]  # fmt: skip
