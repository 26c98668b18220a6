"""One time style: ISO 8601 with `Z` in every --json; local time with its zone in tables and views,
the year only when it is not this year; one "ago" style (`5m ago`, `in 2h`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.errors import UsageError
from agentd.models import InboxKind, StepKind
from agentd.operator.parse import parse_when
from agentd.views import outer as render_outer
from agentd.views import times as render_time

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "sleep", "finish"]
"""
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
WINTER = datetime(2026, 1, 15, 17, 0, tzinfo=UTC)


@pytest.fixture
def paris(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone is Paris (CET in winter, CEST in summer) for the test."""
    monkeypatch.setenv("TZ", "Europe/Paris")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, [])
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def agentd(root: Path, *args: str) -> Result:
    result = CliRunner().invoke(app, ["--home", str(root), *args])
    assert result.exit_code == 0, result.output
    return result


def times_in(value: Any, keys: frozenset[str]) -> list[Any]:
    """Every value under one of `keys`, anywhere in a JSON document."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k in keys and v is not None]
        return found + [t for v in value.values() for t in times_in(v, keys)]
    if isinstance(value, list):
        return [t for v in value for t in times_in(v, keys)]
    return []


# ── render_time ───────────────────────────────────────────────────────────────────────────────


def test_iso_is_utc_with_z() -> None:
    plus_two = datetime(2026, 3, 1, 19, 0, tzinfo=UTC).astimezone(
        datetime(2026, 3, 1, tzinfo=UTC).astimezone().tzinfo
    )
    assert render_time.iso(datetime(2026, 3, 1, 17, 0, tzinfo=UTC)) == "2026-03-01T17:00:00Z"
    assert render_time.iso(plus_two) == "2026-03-01T19:00:00Z"


def test_local_shows_the_zone_and_the_year_only_when_not_this_year(paris: None) -> None:
    assert render_time.local(WINTER, WINTER) == "Jan 15 18:00 CET"
    assert render_time.local(WINTER + timedelta(days=180), WINTER) == "Jul 14 19:00 CEST"
    assert render_time.local(WINTER - timedelta(days=30), WINTER) == "Dec 16 2025 18:00 CET"
    assert render_time.local(WINTER, WINTER, seconds=True) == "Jan 15 18:00:00 CET"


def test_relative_has_one_style() -> None:
    assert render_time.relative(WINTER - timedelta(minutes=5), WINTER) == "5m ago"
    assert render_time.relative(WINTER + timedelta(hours=2), WINTER) == "in 2h"
    assert render_time.relative(WINTER, WINTER) == "now"
    assert render_time.relative(None, WINTER) == "-"
    assert render_outer.relative(WINTER.timestamp() - 90, WINTER.timestamp()) == "1m30s ago"


def test_the_outer_loops_views_share_the_style(paris: None) -> None:
    t = WINTER.timestamp()
    assert render_outer.local(t, "America/New_York", t) == "Thu Jan 15 12:00 EST"
    assert render_outer.local(t, None, t) == "Thu Jan 15 18:00 CET"  # no zone: the local one
    assert render_outer.local(t, "UTC", t + 365 * 86400) == "Thu Jan 15 2026 17:00 UTC"


def test_parse_when_reads_a_naive_time_in_the_local_zone(paris: None) -> None:
    assert parse_when("2026-03-01T17:00", WINTER) == datetime(2026, 3, 1, 16, tzinfo=UTC)
    assert parse_when("2026-03-01", WINTER) == datetime(2026, 2, 28, 23, tzinfo=UTC)
    assert parse_when("2026-03-01T17:00Z", WINTER) == datetime(2026, 3, 1, 17, tzinfo=UTC)
    assert parse_when("3d", WINTER) == WINTER + timedelta(days=3)


def test_parse_when_refuses_the_past() -> None:
    with pytest.raises(UsageError, match="in the past"):
        parse_when("2026-01-01", WINTER)


# ── through the CLI ───────────────────────────────────────────────────────────────────────────


def test_every_json_time_is_iso_8601_with_z(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    until = time.time() + 3600

    def journal(c: Any) -> None:
        q.append_step(c, run_id, 0, StepKind.DECIDE, data={"reason": "wait"})
        epoch = leases.claim_run(c, run_id, "me", 60)
        qt.suspend(
            c, run_id, epoch, {"kind": "timer", "why": "sleep", "until": until}, wake_at=until
        )
        qi.post(c, InboxKind.NOTICE, title="n", body="b", run_id=run_id, expires_at=until)

    cli_home.store.write(journal)
    keys = frozenset(("created_at", "updated_at", "completed_at", "next_wake_at", "until",
                      "expires_at", "oldest", "now"))  # fmt: skip
    outputs = [
        agentd(cli_home.root, "runs", "show", str(run_id), "--json").stdout,
        agentd(cli_home.root, "runs", "list", "--json").stdout,
        agentd(cli_home.root, "inbox", "list", "--json").stdout,
        agentd(cli_home.root, "status", "--json").stdout,
        agentd(cli_home.root, "goal", "show", "1", "--json").stdout,
    ]
    found = [t for out in outputs for t in times_in(json.loads(out), keys)]
    assert len(found) > 10
    assert [t for t in found if not (isinstance(t, str) and ISO_Z.match(t))] == []
    shown = json.loads(outputs[0])
    assert shown["wait"]["until"] == render_time.iso(datetime.fromtimestamp(until, UTC))


def test_views_show_local_time_with_the_zone_and_one_ago_style(cli_home: Any, paris: None) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    zone = datetime.now(UTC).astimezone().tzname()  # CET or CEST, whichever holds today
    shown = agentd(cli_home.root, "runs", "show", str(run_id)).stdout
    assert re.search(rf"^started: +\w{{3}} \d+ \d\d:\d\d {zone} \((now|\d+s ago)\)$", shown, re.M)
    assert re.search(rf"^\w{{3}} \w{{3}} \d+ \({zone}\)$", shown, re.M)  # the timeline's day
    goal = agentd(cli_home.root, "goal", "show", "1").stdout
    assert re.search(rf"^created: +\w{{3}} \d+ \d\d:\d\d {zone} ", goal, re.M)
    assert "UTC" not in shown and "Z " not in shown
    listed = agentd(cli_home.root, "runs", "list").stdout
    assert re.search(r"\b(now|\d+s ago)\b", listed)
