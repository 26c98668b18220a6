"""The daemon's lifecycle as an operator meets it: real `agentd serve` processes, real signals.

One daemon per home; SIGTERM lets the step in flight reach its journal (or, past the grace,
leaves an intent the next start resolves without repeating a non-idempotent action); answers
given while it is down apply at the next start; an unusable database or a malformed config stops
`serve` with one clear line and no traceback.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxItem, InboxKind, RunStatus, Step, StepKind, StepStatus
from tests import processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

AGENTD = processes.AGENTD  # the old name: other modules import it from here
FINISH = {
    "reason": "all done",
    "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"},
}


def act(kind: str, **args: Any) -> dict[str, Any]:
    return {"reason": f"do {kind}", "action": {"kind": kind, **args}}


class Daemon:
    """One home and the `agentd serve` processes started on it (each logs to daemon-N.log)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.paths = config.Paths(home)
        self.procs: list[subprocess.Popen[bytes]] = []
        self._store: SyncStore | None = None

    def write(
        self, replies: list[Any], actions: dict[str, str] | None = None, daemon: str = ""
    ) -> None:
        """config.toml (agent `default` may use `actions` plus finish and ask) and replies.json."""
        actions = actions or {}
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "replies.json").write_text(json.dumps(replies))
        tables = "".join(
            f"\n[actions.{name}]\n{textwrap.dedent(body)}" for name, body in actions.items()
        )
        names = ", ".join(f'"{a}"' for a in [*actions, "finish", "ask"])
        self.paths.config.write_text(
            f"[daemon]\npoll_interval_s = 0.05\n{daemon}\n\n"
            f'[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n'
            f"{tables}\n[agents.default]\nactions = [{names}]\n"
        )

    def log(self, n: int) -> Path:
        return self.home / f"daemon-{n}.log"

    def start(self, **popen: Any) -> subprocess.Popen[bytes]:
        """Start `agentd serve` (its log in daemon-N.log); `popen`: more Popen arguments."""
        proc = processes.start(self.home, self.log(len(self.procs) + 1), **popen)
        self.procs.append(proc)
        return proc

    def serve(self) -> subprocess.Popen[bytes]:
        """Start a daemon and wait for its `daemon.ready` line."""
        proc = self.start()
        processes.wait_ready(proc, self.log(len(self.procs)))
        return proc

    def terminate(self, proc: subprocess.Popen[bytes], timeout_s: float = 20) -> tuple[int, float]:
        """SIGTERM the daemon itself (not its children); returns its exit code and how long it took."""
        started = time.monotonic()
        code = processes.terminate(proc, timeout_s)
        return code, time.monotonic() - started

    def kill_all(self) -> None:
        for proc in self.procs:
            processes.kill(proc)
        if self._store is not None:
            self._store.close()

    def logs(self) -> str:
        return "".join(self.log(n).read_text() for n in range(1, len(self.procs) + 1))

    # ── the database, as the tests arrange and inspect it ─────────────────────────────────────
    @property
    def store(self) -> SyncStore:
        if self._store is None:
            self._store = SyncStore(self.paths.db)
        return self._store

    def new_run(self) -> int:
        def work(c: Any) -> int:
            goal_id = q.add_goal(
                c, title="lifecycle", why="tests", agent="default", criteria=[], deadline=None
            )
            return q.create_run(c, goal_id=goal_id, agent="default", trigger="test")

        return self.store.write(work)

    def run(self, run_id: int) -> Any:
        return self.store.read(lambda c: q.get_run(c, run_id))

    def acts(self, run_id: int) -> list[Step]:
        steps = self.store.read(lambda c: q.list_steps(c, run_id))
        return [s for s in steps if s.kind == StepKind.ACT]

    def open_items(self) -> list[InboxItem]:
        return self.store.read(lambda c: qi.list_items(c, status="open"))

    def until(self, what: str, check: Callable[[], Any], timeout_s: float = 20) -> Any:
        deadline = time.monotonic() + timeout_s
        while not (value := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.logs()[-3000:]}")
            time.sleep(0.02)
        return value


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home), *args], capture_output=True, text=True, timeout=60
    )


def one_clear_line(stderr: str) -> str:
    """The operator sees exactly one `agentd: …` message and no traceback."""
    assert "Traceback" not in stderr, stderr
    messages = [ln for ln in stderr.splitlines() if ln.startswith("agentd: ")]
    assert len(messages) == 1, stderr
    return messages[0]


# ── a. one daemon per home ───────────────────────────────────────────────────────────────────
def test_second_daemon_on_the_same_home_exits_at_once(daemon: Daemon) -> None:
    daemon.write([FINISH])
    first = daemon.serve()
    second = daemon.start()
    # At once: it does not wait for the lock (that wait would never end, and time out here);
    # the bound is generous because a loaded machine takes seconds to start Python.
    code = second.wait(timeout=60)
    assert code != 0
    message = one_clear_line(daemon.log(2).read_text())
    assert str(daemon.home) in message and f"pid {first.pid}" in message, message

    # The first one still serves: a new run is picked up and finishes.
    assert first.poll() is None
    run_id = daemon.new_run()
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.run(run_id).status == RunStatus.SUCCEEDED
    assert daemon.terminate(first)[0] == 0


def test_second_daemon_is_refused_even_after_the_lock_file_is_deleted(daemon: Daemon) -> None:
    daemon.write([FINISH])
    daemon.serve()
    daemon.paths.lock.unlink()
    second = daemon.start()
    log = daemon.log(2)
    deadline = time.monotonic() + 60
    while second.poll() is None and '"daemon.ready"' not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    assert second.poll() is not None, "a second daemon is serving the same home"
    assert second.returncode != 0


# ── b. SIGTERM lets the step in flight reach its journal ─────────────────────────────────────
def test_sigterm_mid_action_lets_it_finish_and_journal_then_resumes(daemon: Daemon) -> None:
    out = daemon.home / "effects.txt"
    daemon.write(
        [act("slow"), FINISH],
        actions={"slow": f'type = "command"\nargv = ["sh", "-c", "sleep 1.5; echo done >> {out}"]'},
    )
    proc = daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the action to start", lambda: daemon.acts(run_id))
    code, took = daemon.terminate(proc)
    assert code == 0, daemon.logs()
    assert took > 0.5  # it waited for the command rather than dropping it
    (step,) = daemon.acts(run_id)
    assert step.status == StepStatus.DONE, step
    assert step.result and step.result["ok"] is True and step.result["exit_code"] == 0
    assert daemon.run(run_id).status == RunStatus.RUNNING  # not finished: it stopped cleanly

    daemon.serve()
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.run(run_id).status == RunStatus.SUCCEEDED
    assert out.read_text().splitlines() == ["done"]
    assert daemon.logs().count('"action.executing"') == 1


# ── c. past the grace: an intent without a result, resolved by the operator ──────────────────
def test_sigterm_past_grace_leaves_intent_and_asks_instead_of_repeating(daemon: Daemon) -> None:
    out = daemon.home / "effects.txt"
    daemon.write(
        [act("slow"), FINISH],
        actions={
            "slow": f'type = "command"\nargv = ["sh", "-c", "sleep 30; echo done >> {out}"]\n'
            "timeout_s = 45"
        },
        daemon="shutdown_grace_s = 0.5",
    )
    proc = daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the action to start", lambda: '"action.executing"' in daemon.logs())
    code, took = daemon.terminate(proc)
    assert code == 0, daemon.logs()
    assert took < 25, f"stopping took {took:.1f}s with a 0.5s grace"  # the action sleeps 30 s
    (step,) = daemon.acts(run_id)
    assert step.status == StepStatus.STARTED and step.result is None, step
    key = step.data["key"]

    daemon.serve()
    item = daemon.until("a question for the operator", lambda: daemon.open_items())[0]
    assert item.kind == InboxKind.QUESTION and item.run_id == run_id
    assert key in item.body, item.body
    (step,) = daemon.acts(run_id)
    assert step.status == StepStatus.ERROR and step.result == {
        "ok": False,
        "outcome": "unknown",
        "key": key,
    }

    answered = cli(daemon.home, "inbox", "answer", str(item.item_id), "it did not happen; finish")
    assert answered.returncode == 0, answered.stderr
    assert "continues within a second" in answered.stdout
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.run(run_id).status == RunStatus.SUCCEEDED
    assert not out.exists()  # killed at shutdown, never run again
    assert daemon.logs().count('"action.executing"') == 1


# ── d. an answer given while the daemon is down ─────────────────────────────────────────────
def test_answer_given_while_stopped_applies_at_next_start(daemon: Daemon) -> None:
    daemon.write([act("ask", question="which region?"), FINISH])
    proc = daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the run to wait", lambda: daemon.run(run_id).status == RunStatus.WAITING)
    (item,) = daemon.open_items()
    assert daemon.terminate(proc)[0] == 0

    answered = cli(daemon.home, "inbox", "answer", str(item.item_id), "eu-west-1")
    assert answered.returncode == 0, answered.stderr
    assert "continues when `agentd serve` runs" in answered.stdout
    assert daemon.run(run_id).status == RunStatus.WAITING

    daemon.serve()
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.run(run_id).status == RunStatus.SUCCEEDED
    steps = daemon.store.read(lambda c: q.list_steps(c, run_id))
    (wake,) = [s for s in steps if s.kind == StepKind.WAKE]
    assert wake.data["answer"] == "eu-west-1"


# ── e. an unusable database ─────────────────────────────────────────────────────────────────
def _db_is_a_directory(home: Path) -> Path:
    (home / "agentd.db").mkdir()
    return home


def _db_is_not_a_database(home: Path) -> Path:
    (home / "agentd.db").write_bytes(b"this is not SQLite\n" * 200)
    return home


def _home_under_a_file(home: Path) -> Path:
    blocker = home / "a-file"
    blocker.write_text("not a directory\n")
    return blocker / "home"


@pytest.mark.parametrize(
    "spoil",
    [_db_is_a_directory, _db_is_not_a_database, _home_under_a_file],
    ids=lambda f: f.__name__,
)
def test_serve_on_an_unusable_database_exits_with_one_line(
    daemon: Daemon, spoil: Callable[[Path], Path]
) -> None:
    daemon.write([FINISH])
    home = spoil(daemon.home)
    done = cli(home, "serve")  # bounded by cli()'s timeout: a daemon that waited would fail it
    assert done.returncode != 0, done.stderr
    message = one_clear_line(done.stderr)
    assert str(home) in message or str(daemon.home) in message, message


# ── f. a malformed config ───────────────────────────────────────────────────────────────────
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[daemon]\npoll_interval_s = 0.05\nshutdown_grace_s = = 1\n", 3),  # not TOML
        ('[daemon]\npoll_interval_s = 0.05\n\nlog_level = "loud"\n', 4),  # not a valid value
    ],
    ids=["toml-syntax", "bad-value"],
)
def test_serve_with_a_malformed_config_exits_2_naming_file_and_line(
    daemon: Daemon, text: str, line: int
) -> None:
    daemon.write([FINISH])
    daemon.paths.config.write_text(text)
    done = cli(daemon.home, "serve")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert str(daemon.paths.config) in done.stderr, done.stderr
    assert f"line {line}" in done.stderr, done.stderr
