"""One clock (issue 20, item 5): under `serve --clock-speed` (and `--clock-start`), every time the
daemon and the CLI write is the home's simulated time, and every view counts from the simulated
now — `status`, `goal show`, `inbox list|show`, `runs show` never print a wall time beside a
simulated one. A real `agentd serve` process and the CLI as a user runs it, on a real SQLite file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.clock_home import ClockHome, reply, ts, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FUTURE = "2030-01-07T09:00:00Z"  # a Monday, years from the wall: a mix-up is days, not minutes
SPEED = "3600"  # a simulated hour per wall second: a minute of the test is 2.5 simulated days
REPLIES = [
    reply({"kind": "notify", "message": "checkout answers 502"}),
    reply({"kind": "ask", "question": "Roll back the deploy?"}),
    reply({"kind": "finish", "outcome": "succeeded", "summary": "rolled back"}),
]
# "in 3d", "1402d ago", "2d5h ago": how far a time is, as every view says it
RELATIVE = re.compile(r"\bin (\d+)d|\b(\d+)d(?:\d+h)? ago\b")


@pytest.fixture(params=[(), ("--clock-start", FUTURE)], ids=["speed", "speed+start"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClockHome]:
    home = ClockHome(tmp_path / "home", REPLIES)
    try:
        home.serve("--clock-speed", SPEED, *request.param)
        yield home
    finally:
        home.kill_all()


def _work(home: ClockHome) -> int:
    """A goal added, a run that notifies, asks (answered through the CLI) and finishes; returns
    the question's item id."""
    home.cli("goal", "add", "Keep checkout healthy", "--why", "customers pay through it")
    home.cli("runs", "start", "1")
    asked = until(
        "the run's question",
        lambda: [i for i in home.json("inbox", "list") if i["kind"] == "question"],
    )
    item_id = int(asked[0]["item_id"])
    home.cli("inbox", "answer", str(item_id), "yes")
    until("the run's end", lambda: home.json("runs", "show", "1")["status"] == "succeeded")
    return item_id


def test_rows_carry_the_simulated_time_the_daemon_and_the_cli_wrote(served: ClockHome) -> None:
    before = ts(served.json("status")["now"])  # the simulated now once the daemon is up
    _work(served)
    now = ts(served.json("status")["now"])
    assert now > before + 3600  # seconds of the test are simulated hours

    def simulated(value: str | None) -> bool:
        return value is not None and before <= ts(value) <= now

    goal = served.json("goal", "show", "1")
    assert simulated(goal["created_at"]) and simulated(goal["updated_at"]), goal
    items = served.json("inbox", "list", "--all")
    assert len(items) >= 2 and all(simulated(i["created_at"]) for i in items), items
    answered = next(i for i in items if i["kind"] == "question")
    assert simulated(answered["resolved_at"]), answered  # stamped by the CLI
    run = served.json("runs", "show", "1")
    assert simulated(run["created_at"]) and simulated(run["updated_at"]), run
    stamps = [s["created_at"] for s in run["steps"]] + [
        s["completed_at"] for s in run["steps"] if s["completed_at"]
    ]
    assert len(run["steps"]) >= 6 and all(simulated(t) for t in stamps), run["steps"]


@pytest.mark.parametrize("served", [("--clock-start", FUTURE)], indirect=True, ids=["future"])
def test_no_view_prints_a_wall_time_beside_a_simulated_one(served: ClockHome) -> None:
    item_id = _work(served)
    served.cli("event", "send", "deploy")  # stamped by the CLI on the home's clock
    wall_year = str(datetime.now(UTC).year)
    for args in (
        ("status",),
        ("event", "list"),
        ("runs", "list"),
        ("checkins",),
        ("goal", "show", "1"),
        ("inbox", "list", "--all"),
        ("inbox", "show", str(item_id)),
        ("runs", "show", "1"),
    ):
        text = served.cli(*args).stdout
        far = [m.group(0) for m in RELATIVE.finditer(text) if int(m.group(1) or m.group(2)) >= 7]
        assert not far, f"agentd {' '.join(args)} counts from another clock: {far}\n{text}"
        # A view prints the year only when it is not the year of its now: 2030 here.
        assert wall_year not in text and "2030" not in text, f"agentd {' '.join(args)}:\n{text}"
    usage = served.cli("usage").stdout  # its DAY column is a date: the simulated day's
    assert "2030-01-" in usage and wall_year not in usage, usage
