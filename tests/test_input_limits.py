"""What the command line accepts: blank, oversized and undecodable text, oversized event payloads
and deadlines (local when they carry no zone, never in the past) — each refused with exit 2 and a
message that names the limit, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind
from tests.cli.test_cli import CONFIG, REPLIES, agentd, assert_clean_error


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, REPLIES)
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def goal_add(root: Path, title: str, why: str = "tests", *more: str) -> Any:
    return agentd(root, "goal", "add", title, "--why", why, *more)


def raw_agentd(root: Path, *args: bytes | str) -> subprocess.CompletedProcess[bytes]:
    """The installed CLI with raw argv bytes, as a shell passes them (UTF-8 locale)."""
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    argv = [sys.executable, "-m", "agentd", "--home", str(root), *args]
    return subprocess.run(argv, capture_output=True, env=env, timeout=30, check=False)


# ── titles, --why, answers ─────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("title", ["", "   ", "\t\n"])
def test_goal_add_blank_title_exits_2(cli_home: Any, title: str) -> None:
    assert_clean_error(goal_add(cli_home.root, title), 2, "the title is empty")


def test_goal_add_blank_why_exits_2(cli_home: Any) -> None:
    assert_clean_error(goal_add(cli_home.root, "Keep it up", "  "), 2, "--why is empty")


def test_goal_add_title_over_300_characters_exits_2_naming_the_limit(cli_home: Any) -> None:
    result = goal_add(cli_home.root, "x" * 301)
    assert_clean_error(result, 2, "301 characters", "at most 300")
    assert goal_add(cli_home.root, "x" * 300).exit_code == 0


def test_goal_add_overlong_why_exits_2(cli_home: Any) -> None:
    assert_clean_error(goal_add(cli_home.root, "t", "w" * 2001), 2, "--why", "at most 2,000")


def test_goal_add_strips_the_title(cli_home: Any) -> None:
    result = goal_add(cli_home.root, "  Keep it up  ", "tests", "--json")
    assert json.loads(result.stdout)["title"] == "Keep it up"


def test_goal_add_non_utf8_title_from_argv_exits_2_without_traceback(cli_home: Any) -> None:
    done = raw_agentd(cli_home.root, "goal", "add", b"caf\xe9", "--why", "tests")
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert stderr.startswith("agentd: the title is not valid UTF-8")


def test_event_send_non_utf8_name_from_argv_exits_2(cli_home: Any) -> None:
    done = raw_agentd(cli_home.root, "event", "send", b"deploy\xff")
    assert done.returncode == 2 and "Traceback" not in done.stderr.decode()
    assert "NAME is not valid UTF-8" in done.stderr.decode()


def test_inbox_answer_undecodable_or_oversized_exits_2(cli_home: Any) -> None:
    question = cli_home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="why?"))
    bad = agentd(cli_home.root, "inbox", "answer", str(question), "ok\udcff")
    assert_clean_error(bad, 2, "the answer is not valid UTF-8")
    long = agentd(cli_home.root, "inbox", "answer", str(question), "y" * 4001)
    assert_clean_error(long, 2, "at most 4,000")


# ── events ─────────────────────────────────────────────────────────────────────────────────────


def test_event_send_data_over_64_kib_exits_2_naming_the_limit(cli_home: Any) -> None:
    data = json.dumps({"blob": "x" * 70_000})
    result = agentd(cli_home.root, "event", "send", "deploy", "--data", data)
    assert_clean_error(result, 2, "--data is 70,012 bytes", "at most 65,536 (64 KiB)")
    assert json.loads(agentd(cli_home.root, "event", "list", "--json").stdout) == []


def test_event_send_blank_name_exits_2(cli_home: Any) -> None:
    assert_clean_error(agentd(cli_home.root, "event", "send", " "), 2, "NAME is empty")


# ── deadlines ──────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The local zone is Asia/Tokyo (UTC+9, no DST) for this test."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_goal_add_deadline_without_a_zone_is_local_time(cli_home: Any, tokyo: None) -> None:
    year = datetime.now(UTC).year + 1
    result = goal_add(cli_home.root, "t", "w", "--deadline", f"{year}-03-01T17:00", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deadline"] == f"{year}-03-01T08:00:00Z"
    zoned = goal_add(cli_home.root, "t", "w", "--deadline", f"{year}-03-01T17:00+02:00", "--json")
    assert json.loads(zoned.stdout)["deadline"] == f"{year}-03-01T15:00:00Z"


@pytest.mark.parametrize("when", ["2020-01-01", "2020-01-01T10:00Z", "0d"])
def test_goal_add_deadline_in_the_past_exits_2(cli_home: Any, when: str) -> None:
    assert_clean_error(goal_add(cli_home.root, "t", "w", "--deadline", when), 2, "in the past")
    assert json.loads(agentd(cli_home.root, "goal", "list", "--json").stdout) == []


def test_goal_add_deadline_as_a_delay_is_from_now_and_zero_is_refused(cli_home: Any) -> None:
    assert_clean_error(goal_add(cli_home.root, "t", "w", "--deadline", "0m"), 2, "in the past")
    result = goal_add(cli_home.root, "t", "w", "--deadline", "3d", "--json")
    due = datetime.fromisoformat(json.loads(result.stdout)["deadline"])
    assert abs(due - (datetime.now(UTC) + timedelta(days=3))) < timedelta(minutes=1)


def test_goal_add_help_says_a_deadline_without_a_zone_is_local(cli_home: Any) -> None:
    text = " ".join(agentd(cli_home.root, "goal", "add", "--help").stdout.split())
    assert "no zone: your local time" in text and "Not in the past" in text


def test_a_title_is_one_line(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from agentd.cli import app

    home = tmp_path / "home"
    assert CliRunner().invoke(app, ["--home", str(home), "init"]).exit_code == 0
    two = CliRunner().invoke(app, ["--home", str(home), "goal", "add", "two\nlines", "--why", "w"])
    assert two.exit_code == 2 and "one line" in two.output
