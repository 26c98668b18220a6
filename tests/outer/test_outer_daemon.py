"""The outer loop through real `agentd serve` processes, real APScheduler and the CLI.

Misfire: a goal's 2-second schedule, the daemon stopped across one fire (wall clock) and across
~30 fires (`--clock-speed 20`: simulated time goes on while the daemon is down), for each policy —
every due time is recorded exactly once, as run or as missed with a reason. A goal added through
the CLI is watched for simulated days (`--clock-speed`): looks come at the cadence, never in quiet
hours, an idle goal costs no model call, and a nudge accepted with `agentd inbox accept` runs. A
restart inside quiet hours records what fell due but runs nothing until they end.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import RunStatus
from agentd.outer import timebase
from tests import processes

# A guard against a hang only: each wait below has its own bound and says what it waited for
# (with the daemons' logs). A misfire test starts four daemons and runs three CLI commands around
# ~12 s of wall-clock fires and outages: 25-32 s at load 8, 47-56 s in a full-suite run.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

AGENTD = processes.AGENTD
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
NOTHING = {"reason": "all quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}
NUDGE = {
    "reason": "a new build failure",
    "next_look_in_s": 86400,
    "verdict": {
        "kind": "nudge",
        "topic": "flaky build",
        "message": "The nightly build failed twice; tell the team.",
        "suggested": {"action": "notify", "args": {"message": "nightly build is flaky"}},
        "new": None,
    },
}


class OuterHome:
    """A home, the `agentd serve` processes started on it (daemon-N.log each), and the CLI."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = config.Paths(root)
        self.procs: list[subprocess.Popen[bytes]] = []
        self._store: SyncStore | None = None

    def write(self, checkin: str = "", checkin_replies: list[Any] | None = None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "replies.json").write_text(json.dumps([FINISH]))
        (self.root / "checkins.json").write_text(json.dumps(checkin_replies or [NOTHING]))
        self.paths.config.write_text(
            "[daemon]\npoll_interval_s = 0.05\n\n"
            '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
            '[models.checker]\nprovider = "scripted"\nreplies = "checkins.json"\n'
            'request_log = "checkins.log"\n\n'
            '[agents.default]\nactions = ["notify", "finish"]\n\n'
            f'[agents.default.checkin]\nmodel = "checker"\n{checkin}\n'
        )
        SyncStore(self.paths.db).close()

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [*AGENTD, "--home", str(self.root), *args], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def log(self, n: int) -> Path:
        return self.root / f"daemon-{n}.log"

    def serve(self, *extra: str) -> subprocess.Popen[bytes]:
        log = self.log(len(self.procs) + 1)
        proc = processes.start(self.root, log, *extra)
        self.procs.append(proc)
        processes.wait_ready(proc, log)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        assert processes.terminate(proc) == 0

    def kill_all(self) -> None:
        for proc in self.procs:
            processes.kill(proc)
        if self._store is not None:
            self._store.close()

    def logs(self) -> str:
        return "".join(self.log(n).read_text() for n in range(1, len(self.procs) + 1))

    @property
    def store(self) -> SyncStore:
        if self._store is None:
            self._store = SyncStore(self.paths.db)
        return self._store

    def checkins(self) -> list[qc.Checkin]:
        rows = self.store.read(lambda c: qc.list_checkins(c, limit=100_000))
        return sorted(rows, key=lambda r: r.checkin_id)

    def until(self, what: str, check: Callable[[], Any], timeout_s: float = 60) -> Any:
        deadline = time.monotonic() + timeout_s
        while not (value := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.logs()[-4000:]}")
            time.sleep(0.05)
        return value


@pytest.fixture
def home(tmp_path: Path) -> Iterator[OuterHome]:
    h = OuterHome(tmp_path / "home")
    try:
        yield h
    finally:
        h.kill_all()


# ── misfire: stopped across 1 and across ~30 fires, for each policy ─────────────────────────────


def _fired(home: OuterHome) -> list[qc.Checkin]:
    return [r for r in home.checkins() if r.schedule_id == 1]


def _outage(home: OuterHome, proc: subprocess.Popen[bytes], down_s: float, *speed: str) -> Any:
    """Stop the daemon, stay down `down_s` wall seconds, serve again: returns (the catch-up
    batch the start recorded — every row of its first tick —, the new process)."""
    home.stop(proc)
    before = max((r.checkin_id for r in _fired(home)), default=0)
    time.sleep(down_s)
    proc = home.serve(*speed)
    after = [r for r in _fired(home) if r.checkin_id > before]
    assert after, "the restart recorded nothing for the fires missed while down"
    first_tick = min(r.fired_at for r in after)
    return [r for r in after if r.fired_at == first_tick], proc


def _assert_policy(batch: list[qc.Checkin], policy: str, cap: int) -> None:
    batch = sorted(batch, key=lambda r: r.due_at)
    ran = [r for r in batch if r.status != "missed"]
    missed = [r for r in batch if r.status == "missed"]
    expected = {"skip": 0, "once": 1, "all": min(cap, len(batch))}[policy]
    assert len(ran) == expected, [(r.due_at, r.status, r.reason) for r in batch]
    assert ran == batch[len(batch) - expected :]  # the newest ones run
    assert all(r.reason and "late" in r.reason for r in missed)


@pytest.mark.parametrize("policy", ["skip", "once", "all"])
def test_misfire_policy_after_outages_of_one_and_thirty_fires(home: OuterHome, policy: str) -> None:
    home.write()
    home.cli("goal", "add", "watch the build", "--why", "tests", "--criterion", "green")
    # The cadence look stays weeks away: only the schedule fires here.
    home.cli("goal", "cadence", "1", "--every", "14d", "--min", "13d", "--quiet", "none")
    home.cli("goal", "schedule", "1", "--every", "2s", "--misfire", policy, "--cap", "3")

    # Wall clock: real APScheduler wake-ups; down across one fire (or two).
    proc = home.serve()
    home.until("two fires", lambda: len(_fired(home)) >= 2)
    batch, proc = _outage(home, proc, 2.2)
    assert batch  # one fire, or more while a loaded machine takes seconds to start the daemon
    _assert_policy(batch, policy, 3)
    n = len(_fired(home))
    home.until("the schedule to go on firing", lambda: len(_fired(home)) > n)

    # Simulated clock, 20× the wall: 3 s down are 60 s of missed 2-second fires.
    home.stop(proc)
    proc = home.serve("--clock-speed", "20")
    n = len(_fired(home))
    home.until("fires on the scaled clock", lambda: len(_fired(home)) >= n + 3)
    batch, proc = _outage(home, proc, 3.0, "--clock-speed", "20")
    assert len(batch) >= 30
    _assert_policy(batch, policy, 3)
    n = len(_fired(home))
    home.until("the schedule to go on firing", lambda: len(_fired(home)) > n)
    home.stop(proc)

    # Never silently dropped: every due time from the first to the last is recorded, once.
    dues = sorted(r.due_at for r in _fired(home))
    gaps = {round(b - a, 3) for a, b in itertools.pairwise(dues)}
    assert gaps == {2.0}, gaps
    # Idle: every fire that ran was skipped by the precheck. A goal's check-ins run one at a
    # time, oldest first, so the newest may still wait when the daemon stops (how many depends
    # on how busy the machine is) — but none waits behind a newer one that ran.
    statuses = [r.status for r in sorted(_fired(home), key=lambda r: r.due_at)]
    waiting = statuses.index("due") if "due" in statuses else len(statuses)
    assert set(statuses[:waiting]) <= {"missed", "skipped"}, statuses
    assert set(statuses[waiting:]) <= {"missed", "due"}, statuses
    assert waiting > len(statuses) // 2, statuses  # most were looked at
    assert not (home.root / "checkins.log").exists()
    assert '"checkin.missed"' in home.logs() or policy != "skip"


# ── a goal added through the CLI, watched for simulated days ────────────────────────────────────

SPEED = 14400.0  # four simulated hours per wall second


def _quiet(t: float) -> bool:
    hour = datetime.fromtimestamp(t, UTC).hour
    return hour >= 22 or hour < 8


def test_goal_added_through_the_cli_checks_in_for_simulated_days(home: OuterHome) -> None:
    home.write('quiet = "22:00-08:00"\ntz = "UTC"', [NUDGE, NOTHING])
    home.cli("goal", "add", "keep the nightly build green", "--why", "releases depend on it",
             "--criterion", "nightly passes")  # fmt: skip
    proc = home.serve("--clock-speed", str(SPEED))
    started = home.store.read(lambda c: timebase.now(c, time.time()))

    def looks() -> list[qc.Checkin]:
        return [r for r in home.checkins() if r.schedule_id is None and r.status != "due"]

    # Idle for three simulated days: the cadence looks (daily), each skipped by the precheck.
    home.until("three idle days", lambda: len(looks()) >= 3)
    idle = looks()
    assert all(r.status == "skipped" and r.reason == "nothing moved" for r in idle)
    assert not (home.root / "checkins.log").exists()  # no model call for an idle goal
    gaps = [b.due_at - a.due_at for a, b in itertools.pairwise(idle)]
    assert all(20 * 3600 <= g <= 40 * 3600 for g in gaps), gaps  # about daily (a slow host drifts)
    assert idle[0].due_at - started <= 16 * 3600  # the first look comes soon after the goal

    # Something moves for the goal: the next look asks the model, which nudges.
    home.cli("event", "send", "build.failed", "--data", json.dumps({"goal_id": 1}))
    nudge = home.until(
        "a nudge",
        lambda: [
            i
            for i in home.store.read(lambda c: qi.list_items(c, status="open"))
            if i.rule == "nudge"
        ],
    )[0]
    assert "inbox accept" in nudge.body
    out = home.cli("inbox", "accept", str(nudge.item_id))
    assert "run" in out
    runs = home.until("the accepted run", lambda: home.store.read(
        lambda c: q.list_runs(c, goal_id=1, limit=10)))  # fmt: skip
    home.until("the run to finish", lambda: home.store.read(
        lambda c: q.get_run(c, runs[0].run_id)).status.finished)  # fmt: skip
    assert home.store.read(lambda c: q.get_run(c, runs[0].run_id)).status == RunStatus.SUCCEEDED
    home.stop(proc)

    # None was taken up inside quiet hours (a look is recorded and started in the same tick; at
    # 14400× the wall a slow host can stretch the rest); the journal and `goal show` tell it all.
    ran = [r for r in home.checkins() if r.status != "missed"]
    assert ran and not [r for r in ran if _quiet(r.fired_at)], ran
    shown = json.loads(home.cli("goal", "show", "1", "--json"))
    assert shown["checkin"]["next_at"] and shown["checkin"]["next_why"]
    assert any("nudged" in m["text"] for m in shown["checkin"]["memory"])
    journal = json.loads(home.cli("checkins", "--goal", "1", "--json"))
    assert {r["status"] for r in journal} >= {"skipped", "done"}


# ── a restart inside quiet hours ────────────────────────────────────────────────────────────────


def test_restart_inside_quiet_hours_records_but_does_not_fire(home: OuterHome) -> None:
    now = datetime.now(UTC)
    quiet = f"{now - timedelta(minutes=30):%H:%M}-{now + timedelta(minutes=60):%H:%M}"
    home.write()
    home.cli("goal", "add", "watch the build", "--why", "tests", "--criterion", "green")
    home.cli("goal", "cadence", "1", "--quiet", quiet, "--tz", "UTC")
    home.cli("goal", "schedule", "1", "--every", "2s")
    # The daemon was down when the goal's look fell due an hour ago. The schedule waits until the
    # daemon has deferred that look: one overdue at the start would take the look into its own
    # catch-up (`checkin.missed`, coalesced), another path, and however far ahead it were set, a
    # loaded machine can take longer than that to start the daemon.
    home.store.write(lambda c: c.execute("UPDATE cadences SET next_at = ?", (time.time() - 3600,)))
    home.store.write(
        lambda c: c.execute("UPDATE schedules SET next_fire_at = ?", (time.time() + 86400,))
    )

    proc = home.serve()
    end = (now + timedelta(minutes=60)).replace(second=0, microsecond=0).timestamp()

    def look_moved() -> bool:  # to the end of quiet hours (a loaded machine takes a while)
        look = home.store.read(lambda c: qc.cadence_row(c, 1))
        return look is not None and abs(look["next_at"] - end) < 1

    home.until("the overdue look moved to the end of quiet hours", look_moved)
    # Now the schedule fires, inside quiet hours (the daemon sees the commit at its next tick).
    home.store.write(
        lambda c: c.execute("UPDATE schedules SET next_fire_at = ?", (time.time() + 2,))
    )
    home.until("a scheduled fire recorded", lambda: len(_fired(home)) >= 2)
    time.sleep(1.0)
    rows = home.checkins()
    assert rows and all(r.status in ("due", "missed") for r in rows)  # recorded, none ran
    look = home.store.read(lambda c: qc.cadence_row(c, 1))
    assert look is not None and abs(look["next_at"] - end) < 1, look
    assert "quiet hours until" in look["next_why"]
    assert '"checkin.deferred"' in home.logs()

    # Quiet hours lifted: what was deferred runs now (and, with nothing moved, costs nothing).
    home.cli("goal", "cadence", "1", "--quiet", "none")
    home.until("the deferred check-ins to run",
               lambda: all(r.status != "due" for r in home.checkins()[:2]))  # fmt: skip
    home.stop(proc)
