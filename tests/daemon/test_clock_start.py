"""`agentd serve --clock-speed N --clock-start ISO`: the home's simulated clock starts at the given
instant (in the future or the past), a restart without it continues from where the clock was,
and a bad value or one without --clock-speed is refused with the flag named and an example.
A real `agentd serve` process on a real SQLite file; the refusals through the CLI in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from tests.clock_home import ClockHome, reply, ts

FINISH = reply({"kind": "finish", "outcome": "succeeded", "summary": "ok"})


@pytest.fixture
def home(tmp_path: Path) -> Iterator[ClockHome]:
    h = ClockHome(tmp_path / "home", [FINISH])
    try:
        yield h
    finally:
        h.kill_all()


def _now(home: ClockHome) -> float:
    return ts(home.json("status")["now"])


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_clock_start_sets_the_homes_now_and_a_restart_continues_from_it(home: ClockHome) -> None:
    start = ts("2030-01-07T09:00:00Z")
    proc = home.serve("--clock-speed", "60", "--clock-start", "2030-01-07T09:00:00Z")
    began = _now(home)
    assert start <= began < start + 3600  # a minute a second: the test's seconds, not years
    home.cli("goal", "add", "Keep checkout healthy", "--why", "customers pay through it")
    assert began <= ts(home.json("goal", "show", "1")["created_at"]) <= _now(home)
    home.stop(proc)
    left = _now(home)  # while down, the recorded clock goes on at its speed

    home.serve("--clock-speed", "60")  # no --clock-start: continued, not back to the wall
    assert left <= _now(home) < start + 2 * 3600


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_clock_start_in_the_past_moves_the_clock_back_and_says_so(home: ClockHome) -> None:
    home.serve("--clock-speed", "1", "--clock-start", "2001-02-03T04:05:06+01:00")
    now = _now(home)
    assert ts("2001-02-03T03:05:06Z") <= now < ts("2001-02-03T03:05:06Z") + 600
    assert '"daemon.clock_moved_back"' in home.log(1).read_text()


def _serve(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(root), "serve", *args])


def test_clock_start_that_is_not_iso_is_refused_with_an_example(home: ClockHome) -> None:
    result = _serve(home.root, "--clock-speed", "3600", "--clock-start", "next tuesday")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("agentd: --clock-start 'next tuesday'"), result.stderr
    assert "--clock-start 2030-01-01T09:00:00Z" in result.stderr
    assert "Traceback" not in result.output


def test_clock_start_without_clock_speed_is_refused(home: ClockHome) -> None:
    result = _serve(home.root, "--clock-start", "2030-01-01")
    assert result.exit_code == 2, result.output
    assert "needs --clock-speed" in result.stderr and "--clock-speed 1" in result.stderr


@pytest.mark.parametrize("start", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1969-07-20"])
def test_clock_start_out_of_range_is_refused_before_it_breaks_the_home(
    home: ClockHome, start: str
) -> None:
    # a clock started near year 9999 runs past datetime's range: every command would crash
    result = _serve(home.root, "--clock-speed", "3600", "--clock-start", start)
    assert result.exit_code == 2, result.output
    assert "give a time from 1971 to 2999" in result.stderr, result.stderr
    assert "Traceback" not in result.output
