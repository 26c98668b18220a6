"""Lists page (issue 35): `goal list`, `runs list`, `event list` and `inbox list` take --limit and
--after, each page continues where the last ended (whatever was added meanwhile), the total is
under a page that is not the last, and the pages together are the whole list once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.db import pages
from agentd.db import queries as q
from agentd.models import GoalStatus, InboxKind

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "finish"]
"""
REPLIES = [{"reason": "ok", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}]


@pytest.fixture
def filled(home: Any) -> Any:
    home.write_config(CONFIG, REPLIES)

    def work(c: Any) -> None:
        for n in range(23):
            g = q.add_goal(c, title=f"goal {n}", why="paging", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            q.create_run(c, goal_id=g, agent="default", trigger="operator")
            qi.add_event(c, f"e{n}", {}, None)
            qi.post(c, InboxKind.NOTICE, title=f"notice {n}", goal_id=g)

    home.store.write(work)
    return home


def agentd(root: Path, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--home", str(root), *args])
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize(
    ("command", "key", "newest_first"),
    [(["goal", "list"], "goal_id", False), (["runs", "list"], "run_id", True),
     (["event", "list"], "event_id", True), (["inbox", "list"], "item_id", False)],
)  # fmt: skip
def test_pages_together_are_the_list_once(
    filled: Any, command: list[str], key: str, newest_first: bool
) -> None:
    seen: list[int] = []
    after: list[str] = []
    for _ in range(5):
        rows = json.loads(agentd(filled.root, *command, "--limit", "10", *after, "--json").stdout)
        if not rows:
            break
        seen += [r[key] for r in rows]
        text = agentd(filled.root, *command, "--limit", "10", *after).stdout
        found = re.search(r"(\d+) of 23 \w+ shown; the next page: --after (\d+)", text)
        if len(rows) < 10 or seen[-1] in ((1,) if newest_first else (23,)):
            assert found is None, text  # the last page says nothing more
            break
        assert found is not None and int(found[2]) == seen[-1], text
        after = ["--after", found[2]]
    assert seen == sorted(range(1, 24), reverse=newest_first)


def test_page_total_counts_the_filter_and_ignores_the_cursor(filled: Any) -> None:
    filled.store.write(lambda c: q.set_goal_status(c, 3, GoalStatus.PAUSED))
    page = filled.store.read(lambda c: pages.goals(c, status="active", after=10, limit=5))
    assert [g.goal_id for g in page.rows] == [11, 12, 13, 14, 15]
    assert (page.total, page.next_after) == (22, 15)
    last = filled.store.read(lambda c: pages.goals(c, status="active", after=20, limit=5))
    assert ([g.goal_id for g in last.rows], last.next_after) == ([21, 22, 23], None)
