"""`agentd doctor` says when the home runs on a simulated clock (`serve --clock-speed N`), as
`status` does: the times it and every view show are then not the wall's."""

from __future__ import annotations

import json
import time

from agentd.outer import timebase
from tests.cli.test_cli import agentd
from tests.conftest import Home


def clock_check(home: Home) -> list[dict[str, object]]:
    out = agentd(home.root, "doctor", "--json").stdout
    return [c for c in json.loads(out)["checks"] if c["name"] == "clock"]


def test_doctor_says_the_clock_is_simulated(home: Home) -> None:
    home.root.mkdir(parents=True)
    home.add_goal()
    home.store.write(lambda c: timebase.scaled(c, 3600.0, time.time()))
    [check] = clock_check(home)
    assert check["ok"] and not check["required"]
    assert str(check["message"]).startswith("simulated, 3600× the wall (`serve --clock-speed`)")
    text = agentd(home.root, "doctor").stdout
    assert "simulated, 3600× the wall" in text


def test_doctor_on_the_wall_says_nothing_of_a_clock(home: Home) -> None:
    home.root.mkdir(parents=True)
    home.add_goal()
    assert clock_check(home) == []
