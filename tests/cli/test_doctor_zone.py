"""`agentd doctor` says when an agent keeps its quiet hours in UTC on a machine in another zone
(a home made before `init` wrote the machine's zone): information, with the line to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentd import config
from agentd.cli.doctor_zone import check_zone

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]

[agents.default.checkin]
tz = "{tz}"
"""


def load(tmp_path: Path, tz: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG.format(tz=tz))
    return config.load(path)


def test_doctor_names_the_machines_zone_when_quiet_hours_are_utcs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    load(home, "UTC")
    env = {**os.environ, "TZ": "America/Los_Angeles"}
    done = subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), "doctor", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    [check] = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "time zone"]
    assert not check["ok"] and not check["required"]
    assert 'set tz = "America/Los_Angeles" under [agents.NAME.checkin]' in check["message"]
    assert "quiet hours 22:00-08:00 in UTC" in check["message"]


def test_doctor_is_silent_when_the_zones_agree(tmp_path: Path) -> None:
    assert check_zone(load(tmp_path, "Europe/Berlin"), here="America/Los_Angeles") == []
    assert check_zone(load(tmp_path, "UTC"), here="UTC") == []
