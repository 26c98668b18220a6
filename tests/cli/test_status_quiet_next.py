"""`status`'s next check-ins under quiet hours (issue 35's leftover): the candidates come from the
due-time indexes, soonest recorded time first, and quiet hours move a time later — so 60 looks
due tonight, all moved to 08:00, must not hide a goal without quiet hours whose look is due at
00:30, 61st in the index. Also: the list is the same whoever reads it (a goal with a schedule,
one snoozed), and far fewer goals are planned than exist."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.operator import overview
from agentd.operator import schedules as plan
from tests.configs import scripted_home
from tests.conftest import Home

NIGHT = datetime(2026, 3, 2, 23, 0, tzinfo=UTC).timestamp()  # 23:00 UTC, inside 22:00-08:00
MORNING = datetime(2026, 3, 3, 8, 0, tzinfo=UTC).timestamp()
CONFIG = scripted_home(
    ["notify", "finish"],
    agent_tables='[agents.default.checkin]\ntz = "UTC"\nquiet = "22:00-08:00"\njitter_s = 0\n'
    "min_s = 3600\n",
)


def goals(home: Home, looks: list[float], quiet: dict[int, str] | None = None) -> list[int]:
    def work(c: Any) -> list[int]:
        ids = []
        for i, t in enumerate(looks):
            g = q.add_goal(c, title=f"goal {i}", why="tests", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            if quiet and i in quiet:
                qs.set_overrides(c, g, NIGHT, quiet=quiet[i])
            qc.set_next(c, g, t, "a look", NIGHT)
            ids.append(g)
        return ids

    return list(home.store.write(work))


def soonest(home: Home, cfg: Any) -> list[tuple[int, float]]:
    looks, _ = home.store.read(lambda c: overview._checkins(c, cfg, NIGHT))
    return [(x["goal_id"], x["at"].timestamp()) for x in looks]


def test_a_goal_without_quiet_hours_behind_60_moved_looks_comes_first(home: Home) -> None:
    cfg = home.write_config(CONFIG, [])
    n = overview.CANDIDATES + 10
    ids = goals(home, [NIGHT + 60 * (i + 1) for i in range(n)] + [NIGHT + 90 * 60],
                quiet={n: "none"})  # fmt: skip
    found = soonest(home, cfg)
    assert found[0] == (ids[-1], NIGHT + 90 * 60), found  # 00:30, its look: no quiet hours
    assert [t for _, t in found[1:]] == [MORNING] * (overview.NEXT_CHECKINS - 1)
    # Each is what `goal show` says of it.
    for goal_id, at in found:
        goal = home.store.read(lambda c, g=goal_id: q.get_goal(c, g))
        shown = home.store.read(lambda c, g=goal: plan.next_checkin(c, cfg, g, NIGHT))
        assert shown is not None and shown.at == at


def test_only_the_goals_that_can_come_first_are_planned(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All looks moved to 08:00 by the same quiet hours: once five are placed there, a look
    recorded later cannot come sooner — the rest of the index is not read."""
    cfg = home.write_config(CONFIG, [])
    goals(home, [NIGHT + 60 * (i + 1) for i in range(300)])
    calls: list[int] = []
    real = plan.next_checkin

    def counted(c: Any, cfg: Any, goal: Any, now: float) -> Any:
        calls.append(goal.goal_id)
        return real(c, cfg, goal, now)

    monkeypatch.setattr(plan, "next_checkin", counted)
    found = soonest(home, cfg)
    assert [t for _, t in found] == [MORNING] * overview.NEXT_CHECKINS
    assert len(calls) == overview.NEXT_CHECKINS, calls


def test_a_goal_with_its_own_quiet_hours_is_found_however_deep(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deeper than the candidates read (here: no more than the first read), a goal that set
    its own quiet hours is planned up front all the same."""
    monkeypatch.setattr(overview, "MAX_CANDIDATES", overview.CANDIDATES)
    cfg = home.write_config(CONFIG, [])
    n = 3 * overview.CANDIDATES
    ids = goals(home, [NIGHT + 60 * (i + 1) for i in range(n)] + [NIGHT + 7 * 3600],
                quiet={n: "none"})  # fmt: skip
    assert soonest(home, cfg)[0] == (ids[-1], NIGHT + 7 * 3600)
