"""A new home's quiet hours are the operator's night: `agentd init` writes this machine's time zone
into checkin.tz (the template said "UTC", so 22:00-08:00 UTC put a Los Angeles goal's first
check-in at 03:30 local). Checked for a matrix of zones, seasons and times of day through the
path the daemon plans a new goal's first look on (the cadence, then the goal's jitter)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agentd import config
from agentd.cli import init_text
from agentd.outer import cadence, checkin

ZONES = ["America/Los_Angeles", "Europe/Berlin", "Asia/Kolkata", "Pacific/Auckland"]


def init_home(tmp_path: Path, tz: str) -> config.Config:
    home = tmp_path / tz.replace("/", "-")
    env = {**os.environ, "TZ": tz}
    subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), "init"],
        env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return config.load(home / "config.toml")


def first_look(cfg: config.Config, goal_id: int, now: float) -> float:
    """When the daemon plans a new goal's first look (outer.service._plan → checkin.next_look)."""
    ci = cfg.agents["default"].checkin
    cad = cadence.cadence_from(ci, None)
    at, _ = cadence.next_look(cad, now, proposed=ci.min_s, backoff=0, deadline=None,
                              snoozed_until=None)  # fmt: skip
    return checkin.spread(cad, goal_id, ci.jitter_s, at, None)


@pytest.mark.parametrize("tz", ZONES)
def test_a_new_goals_first_look_is_never_in_the_operators_night(tmp_path: Path, tz: str) -> None:
    cfg = init_home(tmp_path, tz)
    assert cfg.agents["default"].checkin.tz == tz
    zone = ZoneInfo(tz)
    for month in (1, 7):  # both sides of DST where the zone has it
        start = datetime(2026, month, 14, tzinfo=zone)
        for step in range(48):  # a goal added every half hour of the day
            added = start + timedelta(minutes=30 * step)
            at = datetime.fromtimestamp(first_look(cfg, step + 1, added.timestamp()), zone)
            assert 8 <= at.hour < 22, f"goal added {added:%a %H:%M} {tz}: first look {at:%a %H:%M}"


def test_the_machine_zone_comes_from_tz_then_localtime(tmp_path: Path) -> None:
    assert init_text.machine_zone({"TZ": "Europe/Berlin"}) == "Europe/Berlin"
    assert init_text.machine_zone({"TZ": ":Asia/Tokyo"}) == "Asia/Tokyo"
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/America/New_York")
    assert init_text.machine_zone({}, str(link)) == "America/New_York"
    assert init_text.machine_zone({"TZ": "Not/AZone"}, str(link)) == "UTC"  # never a guess
    assert init_text.machine_zone({}, str(tmp_path / "missing")) == "UTC"
    utc = tmp_path / "utc"
    utc.symlink_to("/usr/share/zoneinfo/Etc/UTC")  # Debian's default: the template's UTC as is
    assert init_text.machine_zone({}, str(utc)) == "UTC"
    assert init_text.machine_zone({"TZ": "Etc/GMT"}) == "UTC"


def test_the_template_keeps_its_comment_column() -> None:
    line = '[x]\ntz = "UTC"                     # IANA time zone; default UTC\n'
    out = init_text.in_zone(line, "Europe/Berlin")
    assert 'tz = "Europe/Berlin"           # IANA' in out
    assert out.index("#") == line.index("#")
    assert init_text.in_zone(line, "UTC") == line
