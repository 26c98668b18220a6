"""--json --total on the list commands (issue 35): one object {goals|runs|events|items, total,
next_after}, what the JSON API's lists answer, so a script pages and counts; --json alone stays
the bare array."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.test_paging import agentd, filled  # noqa: F401  # the fixture: 23 of each

COMMANDS = [(["goal", "list"], "goal_id"), (["runs", "list"], "run_id"),
            (["event", "list"], "event_id"), (["inbox", "list"], "item_id")]  # fmt: skip


@pytest.mark.parametrize(("command", "key"), COMMANDS)
def test_json_total_pages_and_counts(filled: Any, command: list[str], key: str) -> None:  # noqa: F811
    seen: list[int] = []
    after: list[str] = []
    while True:
        out = json.loads(agentd(filled.root, *command, "--limit", "10", *after, "--json",
                                "--total").stdout)  # fmt: skip
        noun = {"goal": "goals", "runs": "runs", "event": "events", "inbox": "items"}[command[0]]
        assert set(out) == {noun, "total", "next_after"} and out["total"] == 23
        seen += [r[key] for r in out[noun]]
        if out["next_after"] is None:
            break
        assert out["next_after"] == seen[-1]
        after = ["--after", str(out["next_after"])]
    assert sorted(seen) == list(range(1, 24)) and len(seen) == 23
    bare = json.loads(agentd(filled.root, *command, "--limit", "10", "--json").stdout)
    assert isinstance(bare, list) and [r[key] for r in bare] == seen[:10]  # as before
