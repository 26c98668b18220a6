"""`agentd status` says when the home runs on a simulated clock (`serve --clock-speed N`): every
time it shows is the simulated one, so a reader must be told before them."""

from __future__ import annotations

import json
import time

from agentd.outer import timebase
from tests.cli.test_cli import agentd
from tests.conftest import Home


def test_status_says_the_clock_is_simulated(home: Home) -> None:
    home.root.mkdir(parents=True)
    home.add_goal()
    home.store.write(lambda c: timebase.scaled(c, 3600.0, time.time()))
    text = agentd(home.root, "status").stdout
    assert text.splitlines()[1] == "clock:  simulated, 3600× the wall (`serve --clock-speed`)"
    assert json.loads(agentd(home.root, "status", "--json").stdout)["clock_speed"] == 3600.0


def test_status_on_the_wall_says_nothing_of_a_clock(home: Home) -> None:
    home.root.mkdir(parents=True)
    home.add_goal()
    assert "clock:" not in agentd(home.root, "status").stdout
