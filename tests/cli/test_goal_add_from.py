"""`goal add --from FILE`: many goals at once, all checked before any is stored; and the CLI's
duration messages (a negative snooze, a zero interval) that used to say the wrong thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "h"
    assert run(root, "init").exit_code == 0
    return root


def run(root: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, ["--home", str(root), *args], input=stdin)


def listed(root: Path) -> list[dict[str, object]]:
    result = run(root, "goal", "list", "--json")
    assert result.exit_code == 0, result.output
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


def test_goals_from_json_lines_are_stored_and_their_ids_printed(home: Path) -> None:
    lines = [{"title": f"goal {n}", "why": "w", "criteria": ["c"]} for n in range(1, 51)]
    lines[7]["deadline"] = "7d"
    text = "\n".join(json.dumps(x) for x in lines) + "\n\n"  # a blank line is no goal
    result = run(home, "goal", "add", "--from", "-", "--json", stdin=text)
    assert result.exit_code == 0, result.output
    ids = json.loads(result.stdout)
    assert ids == list(range(1, 51))
    goals = listed(home)
    assert [g["title"] for g in goals] == [f"goal {n}" for n in range(1, 51)]
    assert goals[7]["deadline"] is not None and goals[0]["criteria"] == ["c"]


def test_one_bad_line_stores_nothing_and_every_bad_line_is_named(home: Path) -> None:
    path = home / "goals.jsonl"
    path.write_text(
        '{"title": "fine", "why": "w"}\n'
        '{"title": "no why"}\n'
        "not json\n"
        '{"title": "t", "why": "w", "agnt": "default"}\n'
        '{"title": "t", "why": "w", "agent": "nope"}\n'
        '{"title": "t", "why": "w", "deadline": "yesterday-ish"}\n'
        '{"title": "t", "why": "w", "deadline": "-1d"}\n'
    )
    result = run(home, "goal", "add", "--from", str(path))
    assert result.exit_code == 2, result.output
    said = result.stderr
    assert "nothing added: 6 of 7 lines are not goals" in said
    for n, fragment in [(2, '"why" is missing'), (3, "not JSON"), (4, "unknown key 'agnt'"),
                        (5, "no agent 'nope'"), (6, '"deadline" \'yesterday-ish\' is not a time'),
                        (7, '"deadline" \'-1d\' is a negative delay')]:  # fmt: skip
        assert f"{path}:{n}: {fragment}" in said
    assert "--deadline" not in said  # the file's key, not the flag
    assert listed(home) == []  # not even the good first line


def test_from_refuses_a_title_beside_it_and_a_goal_needs_title_and_why(home: Path) -> None:
    (home / "g.jsonl").write_text('{"title": "t", "why": "w"}\n')
    both = run(home, "goal", "add", "t", "--why", "w", "--from", str(home / "g.jsonl"))
    assert both.exit_code == 2 and "give no TITLE, --why" in both.stderr
    bare = run(home, "goal", "add")
    assert bare.exit_code == 2 and "a goal needs a TITLE and --why" in bare.stderr
    empty = run(home, "goal", "add", "--from", "-", stdin="\n")
    assert empty.exit_code == 2 and "no goals in it" in empty.stderr


def test_duration_messages_say_what_is_wrong(home: Path) -> None:
    assert run(home, "goal", "add", "t", "--why", "w").exit_code == 0
    negative = run(home, "goal", "snooze", "1", "-1d")
    assert negative.exit_code == 2
    assert "the snooze '-1d' is negative; a duration is how long from now" in negative.stderr
    assert "DUR" not in negative.stderr  # the metavar is no word for a person
    past = run(home, "goal", "add", "t", "--why", "w", "--deadline", "-1d")
    assert past.exit_code == 2 and "--deadline '-1d' is a negative delay" in past.stderr
    cron = run(home, "goal", "schedule", "1", "--cron", "0 0 9 * * 1")
    assert cron.exit_code == 2 and "has 6 fields" in cron.stderr
    assert cron.stderr.count("e.g.") == 1, cron.stderr  # one set of examples
    zero = run(home, "goal", "schedule", "1", "--every", "0")
    assert zero.exit_code == 2 and "--every '0' is zero; it must be longer" in zero.stderr
    assert run(home, "goal", "snooze", "1", "0").exit_code == 0  # 0 still ends a snooze


def test_from_reads_a_file_with_a_byte_order_mark(home: Path) -> None:
    path = home / "bom.jsonl"
    path.write_bytes("\ufeff".encode() + b'{"title": "t", "why": "w"}\n')
    result = run(home, "goal", "add", "--from", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert [g["title"] for g in listed(home)] == ["t"]
