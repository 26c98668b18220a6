"""The service-watch scenario end to end with real processes: the demo checkout service, a daemon
(`agentd serve`) that is SIGKILLed and restarted, and the operator's real CLI.

What must hold whatever the timing: a gated rollback runs at most once and only after approval
(counted by the service's own deploys.log), a recovery while the approval waits withdraws it, and
the runbook and a scripted model drive the identical engine path.
"""

from __future__ import annotations

import functools
import gc
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.store import SyncStore
from agentd.demo.ops import AGENT, Demo, demo_config
from agentd.models import JSON, InboxItem, InboxKind, InboxStatus, Run, RunStatus, Step

pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).with_name("agentd")
AGENTD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agentd"]
RUN_TIMEOUT_S = 40.0
RUNBOOK_MODEL = """[models.default]
provider = "runbook"
health_source = "health"
healthy_checks = 2
recheck_s = 1.0
"""
# The demo's runbook, looking again sooner after a restart or rollback, to keep this file fast.
FAST_RUNBOOK = RUNBOOK_MODEL.replace("recheck_s = 1.0", "recheck_s = 0.3")
SCRIPTED_MODEL = """[models.default]
provider = "scripted"
replies = "replies.json"
"""


def cli(home: Path, *args: str) -> str:
    done = subprocess.run(
        [*AGENTD, "--home", str(home), *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, f"agentd {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def run_json(home: Path, run_id: int = 1) -> JSON:
    return dict(json.loads(cli(home, "runs", "show", str(run_id), "--json")))


def item_json(home: Path, item_id: int) -> JSON:
    items = json.loads(cli(home, "inbox", "list", "--all", "--json"))
    return dict(next(i for i in items if i["item_id"] == item_id))


def rollback_lines(home: Path) -> list[str]:
    """One `key=…` line per rollback the service performed. Its state file is the truth (the
    switch and its key land in one atomic write); deploys.log is written after it, so a SIGKILL
    between the two leaves a rollback that happened without its log line."""
    state = home / "service" / "state.json"
    keys = json.loads(state.read_text()).get("rollback_keys", []) if state.exists() else []
    return [f"rollback key={k}" for k in keys]


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def until(
    pred: Callable[[], bool], what: str, timeout_s: float = RUN_TIMEOUT_S, log: Path | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.02)


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class SafeDemo(Demo):
    """The demo, minus a start-up race pinned by test_demo_service_port_file_is_never_seen_empty:
    `Demo.start_service` may read the service's port file after it is created, before it is
    written, and crash on `int("")`.
    """

    def start_service(self) -> int:
        self.service_dir.mkdir(parents=True)
        serve = ["-m", "agentd.demo.service", "serve", "--state", str(self.service_dir)]
        self.spawn([sys.executable, *serve], "service.out")
        port_file = self.service_dir / "port"
        until(lambda: port_file.exists() and port_file.read_text() != "", "the service's port")
        health = f"http://127.0.0.1:{int(port_file.read_text())}/health"
        until(lambda: http_status(health) == 200, "the service to answer")
        return int(port_file.read_text())


class Scenario:
    """One home: the demo service, a goal for the checkout watcher, and daemons we can SIGKILL."""

    def __init__(self, home: Path, model: str = FAST_RUNBOOK, store: str = "") -> None:
        self.home = home
        self.store_table = store  # a [store] table: the state in a PostgreSQL database
        self.demo = SafeDemo(home, out=io.StringIO())
        self.model = model
        self.store: SyncStore | None = None
        self.daemon: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.goal_id = 0

    @property
    def db(self) -> SyncStore:
        assert self.store is not None
        return self.store

    def start(self) -> None:
        """Service up, daemon up, goal added, first healthy look seen — then the bad deploy."""
        self.home.mkdir(parents=True, exist_ok=True)
        port = self.demo.start_service()
        text = demo_config(self.demo.service_dir, port)
        assert RUNBOOK_MODEL in text, "demo_config's model block changed; update this test"
        self.demo.paths.config.write_text(
            text.replace(RUNBOOK_MODEL, self.model) + self.store_table
        )
        self.store = SyncStore(self.demo.paths.db)
        self.start_daemon()
        self.goal_id = self.db.write(
            lambda c: q.add_goal(
                c, title="Keep checkout healthy", why="tests", agent=AGENT,
                criteria=["/health returns 200"], deadline=None,
            )
        )  # fmt: skip
        self.until(
            lambda: self.db.read(lambda c: worlds.last_snapshot(c, AGENT)) is not None,
            "a first look",
        )
        self.demo.service("deploy", "v2-bad")

    def start_daemon(self) -> None:
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        argv = [sys.executable, "-m", "agentd", "--home", str(self.home), "serve"]
        self.daemon = self.demo.spawn(argv, "daemon.log", env)
        self.starts += 1
        log = self.home / "daemon.log"
        self.until(
            lambda: log.read_text().count('"daemon.ready"') >= self.starts, "the daemon to be ready"
        )

    def kill_daemon(self) -> None:
        assert self.daemon is not None
        os.killpg(self.daemon.pid, signal.SIGKILL)
        self.daemon.wait()

    def run(self) -> Run | None:
        runs = self.db.read(lambda c: q.list_runs(c, goal_id=self.goal_id))
        return runs[-1] if runs else None

    def steps(self, run_id: int) -> list[Step]:
        return self.db.read(functools.partial(q.list_steps, run_id=run_id))

    def items(self, status: str | None = None) -> list[InboxItem]:
        return self.db.read(functools.partial(qi.list_items, status=status))

    def item(self, item_id: int) -> InboxItem:
        return self.db.read(lambda c: qi.get_item(c, item_id))

    def open_approval(self) -> InboxItem | None:
        approvals = [i for i in self.items("open") if i.kind == InboxKind.APPROVAL]
        return approvals[0] if approvals else None

    def wait_approval(self) -> InboxItem:
        self.until(lambda: self.open_approval() is not None, "an approval item", RUN_TIMEOUT_S)
        item = self.open_approval()
        assert item is not None
        return item

    def wait_finished(self) -> Run:
        self.until(lambda: (r := self.run()) is not None and r.status.finished, "the run to end")
        run = self.run()
        assert run is not None
        return run

    def until(self, pred: Callable[[], bool], what: str, timeout_s: float = RUN_TIMEOUT_S) -> None:
        until(pred, what, timeout_s, log=self.home / "daemon.log")

    def close(self) -> None:
        self.demo.stop_all()
        if self.store is not None:
            self.store.close()


@pytest.fixture
def scenario(tmp_path: Path) -> Any:
    made: list[Scenario] = []

    def make(name: str = "home", model: str = FAST_RUNBOOK) -> Scenario:
        s = Scenario(tmp_path / name, model)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def journal_path(run: JSON) -> list[tuple[str, str | None, str | None]]:
    """The engine path of a run: its decide/check/act/finish steps (wakes may differ by timing)."""
    kinds = ("decide", "check", "act", "finish")
    return [(s["kind"], s["action"], s["verdict"]) for s in run["steps"] if s["kind"] in kinds]


def assert_one_rollback_after_approval(home: Path, run: JSON, approval: JSON) -> None:
    lines = rollback_lines(home)
    assert len(lines) == 1, lines
    acts = [s for s in run["steps"] if s["kind"] == "act" and s["action"] == "rollback"]
    assert [a["status"] for a in acts] == ["done"], acts
    assert acts[0]["data"]["approval"] == approval["item_id"]
    assert f"key={acts[0]['data']['key']}" in lines[0]  # the line is that execution's
    assert approval["status"] == "consumed"
    assert at(approval["resolved_at"]) < at(acts[0]["created_at"])


# ── a. the demo command ───────────────────────────────────────────────────────────────────────


@pytest.mark.timeout(90)
def test_demo_yes_rolls_back_once_after_approval_and_succeeds(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    t0 = time.monotonic()
    done = subprocess.run(
        [*AGENTD, "demo", "--yes", "--home", str(home)], capture_output=True, text=True, timeout=80
    )
    wall_s = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"agentd demo --yes: {wall_s:.1f}s wall")

    run = run_json(home)
    assert run["status"] == "succeeded"
    items = json.loads(cli(home, "inbox", "list", "--all", "--json"))
    approvals = [i for i in items if i["kind"] == "approval"]
    assert len(approvals) == 1
    assert_one_rollback_after_approval(home, run, approvals[0])
    # Healthy at the end: the service's state, and the journal's last look before finishing.
    assert json.loads((home / "service" / "state.json").read_text())["version"] == "v1"
    last_look = [s for s in run["steps"] if s["kind"] == "observe"][-1]
    store = SyncStore(home / "agentd.db")
    try:
        world = store.read(lambda c: worlds.get_snapshot(c, last_look["data"]["snapshot_id"]))
    finally:
        store.close()
    assert world["health"]["healthy"] is True and world["health"]["status"] == 200
    assert "after the operator approved it" in run["summary"]


# ── b. SIGKILL while the approval waits ───────────────────────────────────────────────────────


@pytest.mark.timeout(90)
def test_sigkill_while_approval_pending_then_approve_rolls_back_once(scenario: Any) -> None:
    s: Scenario = scenario()
    s.start()
    item = s.wait_approval()
    s.kill_daemon()
    s.start_daemon()
    assert s.open_approval() == item  # the approval survived the crash untouched

    cli(s.home, "inbox", "approve", str(item.item_id))
    run = s.wait_finished()

    assert run.status == RunStatus.SUCCEEDED, run.summary
    shown = run_json(s.home, run.run_id)
    assert_one_rollback_after_approval(s.home, shown, item_json(s.home, item.item_id))


# ── c. SIGKILL right after the approval ───────────────────────────────────────────────────────


@pytest.mark.timeout(90)
@pytest.mark.parametrize("delay_ms", [0, 60, 400])
def test_sigkill_just_after_approval_still_rolls_back_once(scenario: Any, delay_ms: int) -> None:
    s: Scenario = scenario()
    s.start()
    item = s.wait_approval()
    approving = subprocess.Popen(
        [*AGENTD, "--home", str(s.home), "inbox", "approve", str(item.item_id)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Kill relative to the commit of the approval, not to the CLI's exit.
        s.until(lambda: s.item(item.item_id).status != InboxStatus.OPEN, "the approval", 20)
        time.sleep(delay_ms / 1000)
        s.kill_daemon()
    finally:
        assert approving.wait(timeout=30) == 0
    run = s.run()
    assert run is not None
    at_kill = s.steps(run.run_id)[-1]
    s.start_daemon()
    run = s.wait_finished()

    where = f"killed {delay_ms} ms after approving, at #{at_kill.seq} {at_kill.kind}"
    where += f" {at_kill.action or ''} {at_kill.status}"
    assert run.status == RunStatus.SUCCEEDED, f"{where}: {run.summary}"
    shown = run_json(s.home, run.run_id)
    assert_one_rollback_after_approval(s.home, shown, item_json(s.home, item.item_id))
    rollback = next(
        st for st in shown["steps"] if st["action"] == "rollback" and st["kind"] == "act"
    )
    print(f"{where}; rollback result {rollback['result'].get('recovered', 'not recovered')}")


# ── d. the service recovers while the approval waits ──────────────────────────────────────────


@pytest.mark.timeout(90)
def test_recovery_while_pending_withdraws_the_approval(tmp_path: Path) -> None:
    home = tmp_path / "recover"
    code = (
        "import sys; from pathlib import Path; from agentd.demo import ops; "
        f"sys.exit(ops.main(Path({str(home)!r}), yes=False, recover=True))"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=80)

    assert done.returncode == 0, done.stdout + done.stderr
    assert rollback_lines(home) == []
    store = SyncStore(home / "agentd.db")
    try:
        items = store.read(functools.partial(qi.list_items, status=None))
        run = store.read(lambda c: q.get_run(c, 1))
    finally:
        store.close()
    approvals = [i for i in items if i.kind == InboxKind.APPROVAL]
    assert [a.status for a in approvals] == [InboxStatus.EXPIRED]
    assert (approvals[0].answer or "").startswith("withdrawn"), approvals[0].answer
    assert run.status == RunStatus.SUCCEEDED
    assert "the approval was withdrawn" in (run.summary or "")


def test_demo_spawn_closes_its_log_file(tmp_path: Path) -> None:
    """The child keeps its own descriptor; the parent's copy of the log file is closed at once."""
    demo = Demo(tmp_path, out=io.StringIO())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proc = demo.spawn([sys.executable, "-c", "pass"], "child.log")
        gc.collect()
    proc.wait(timeout=30)
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


def test_demo_service_port_file_is_never_seen_empty(tmp_path: Path) -> None:
    """agentd/demo/service.py serve() writes its port file in place (create, then write), so
    `Demo.start_service`, which waits only for the file to exist, can read "" and crash."""
    seen_empty = 0
    for n in range(20):
        state = tmp_path / f"svc{n}"
        serve = ["-m", "agentd.demo.service", "serve", "--state", str(state)]
        proc = subprocess.Popen([sys.executable, *serve], start_new_session=True)
        try:
            port_file, empty = state / "port", False
            deadline = time.monotonic() + 15
            while True:
                try:
                    text = port_file.read_text()
                except FileNotFoundError:
                    text = None  # not there yet: fine
                if text:
                    break
                empty = empty or text == ""  # there, but without its content: the bug
                assert time.monotonic() < deadline, "the service never wrote its port"
            seen_empty += empty
            assert int(text) > 0
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert seen_empty == 0, f"in {seen_empty} of 20 starts the port file existed but was empty"


# ── e. the runbook and a scripted model walk the same engine path ─────────────────────────────


def approve_and_finish(s: Scenario) -> JSON:
    s.start()
    item = s.wait_approval()
    cli(s.home, "inbox", "approve", str(item.item_id))
    run = s.wait_finished()
    return run_json(s.home, run.run_id)


@pytest.mark.timeout(90)
def test_runbook_and_scripted_model_take_the_same_engine_path(scenario: Any) -> None:
    runbook: Scenario = scenario("runbook")
    by_runbook = approve_and_finish(runbook)
    raws = [st["data"]["raw"] for st in by_runbook["steps"] if st["kind"] == "decide"]
    scripted: Scenario = scenario("scripted", SCRIPTED_MODEL)
    scripted.home.mkdir()
    (scripted.home / "replies.json").write_text(json.dumps(raws))

    by_script = approve_and_finish(scripted)

    assert journal_path(by_script) == journal_path(by_runbook)
    assert [st["data"]["raw"] for st in by_script["steps"] if st["kind"] == "decide"] == raws
    assert (by_runbook["status"], by_script["status"]) == ("succeeded", "succeeded")
    assert len(rollback_lines(runbook.home)) == len(rollback_lines(scripted.home)) == 1
