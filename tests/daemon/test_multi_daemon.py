"""Several real `agentd serve` processes on one PostgreSQL database (issue 21; DESIGN §7).

Each daemon has its own home (config, socket, home lock: per host) whose `[store] url` names the
same database, a 3-second lease, and a scripted model. The run's one action is a non-idempotent
command that appends its idempotency key to a file after a long pause (cut short once the test
says so), so a kill or a freeze lands while it is in flight.

(a) A frozen past its lease (SIGSTOP) while its command runs: B takes the run over (invariant 3:
    the interrupted command is fenced, verified not done, run once), A fences itself when thawed,
    exactly one FINISH, the effect exactly once, A's command dead.
(b) A SIGKILLed mid-action: B resumes the run within lease + renewal + scan; A restarted on the
    same host is a new owner and takes nothing back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.config import Paths
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import Run, RunStatus, StepKind, StepStatus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
LEASE_S = 3.0


def write_home(home: Path, url: str, shared: Path) -> None:
    home.mkdir()
    effects, fast = shared / "effects.txt", shared / "fast"
    replies = [
        {"action": {"kind": "append", "word": "once"}},
        {"action": {"kind": "finish", "outcome": "succeeded", "summary": "appended"}},
    ]
    (home / "replies.json").write_text(json.dumps(replies))
    # In flight until the test lets it through; `holding` says it is past its check (a run of the
    # command that starts after `fast` exists does not wait).
    held = f"[ -e {fast} ] || {{ touch {shared / 'holding'}; sleep 60; }}; "
    (home / "config.toml").write_text(
        append_table(effects, ["once"], before=held, timeout_s=120)
        + textwrap.dedent(
            f"""
            [store]
            url = "{url}"
            lease_s = {LEASE_S}

            [daemon]
            poll_interval_s = 0.05

            [models.default]
            provider = "scripted"
            replies = "replies.json"

            [agents.default]
            actions = ["append", "finish"]
            """
        )
    )


def append_table(effects: Path, words: list[str], before: str = "", timeout_s: float = 60) -> str:
    """`[actions.append]`: a non-idempotent command that appends its idempotency key and word to
    `effects` (after the shell `before`), verified by looking for the key there."""
    append = f'{before}echo "$AGENTD_IDEMPOTENCY_KEY {{word}}" >> {effects}'
    verify = f'grep -q "^$AGENTD_IDEMPOTENCY_KEY " {effects} && echo done || echo not-done'
    return (
        '[actions.append]\ntype = "command"\n'
        f'argv = ["sh", "-c", \'{append}\']\n'
        f'verify_argv = ["sh", "-c", \'{verify}\']\n'
        f"timeout_s = {timeout_s}\n"
        f"params = {{ word = {{ choices = {json.dumps(words)} }} }}\n"
    )


class Daemon:
    """One `agentd serve` on its own home; its JSON log in the home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        with (self.home / "daemon.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentd", "--home", str(self.home), "serve"],
                stdout=log, stderr=log, env=env, start_new_session=True,
            )  # fmt: skip
        self.starts += 1
        wait_for(lambda: self.log().count('"daemon.ready"') >= self.starts, "ready", self)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        path = self.home / "daemon.log"
        return path.read_text() if path.exists() else ""

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log().splitlines():
            if f'"{name}"' in line:
                try:
                    out.append(json.loads(line[line.index("{") :]))
                except ValueError:
                    continue
        return out

    def owns(self, run: Run) -> bool:
        return (run.lease_owner or "").split(":")[1:2] == [str(self.pid)]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.pid, signal.SIGCONT)
        os.killpg(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()


def wait_for(cond: Callable[[], object], what: str, *daemons: Daemon, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    logs = "\n".join(f"--- {d.home.name}:\n{d.log()[-2500:]}" for d in daemons)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


@pytest.fixture
def pair(tmp_path: Path, pg_url: str) -> Iterator[tuple[Daemon, Daemon, SyncStore, Path]]:
    shared = tmp_path / "shared"
    shared.mkdir()
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        write_home(home, pg_url, shared)
    store = SyncStore(Paths(homes[0]).db)
    a, b = Daemon(homes[0]), Daemon(homes[1])
    try:
        yield a, b, store, shared
    finally:
        (shared / "fast").touch()
        for d in (a, b):
            d.stop()
        store.close()


def start_run(store: SyncStore) -> int:
    def work(c: Any) -> int:
        goal = q.add_goal(c, title="g", why="multi", agent="default", criteria=[], deadline=None)
        return q.create_run(c, goal_id=goal, agent="default", trigger="cli")

    return store.write(work)


def in_flight(store: SyncStore, run_id: int) -> dict[str, Any] | None:
    """The spawn record of the run's started, unfinished append (None until it has one)."""
    for s in store.read(lambda c: q.list_steps(c, run_id)):
        if s.kind == StepKind.ACT and s.status == StepStatus.STARTED and "spawned" in s.data:
            return dict(s.data["spawned"])
    return None


def session_alive(sid: int) -> bool:
    """Whether any process of session `sid` lives on (zombies do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[-1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] != "Z" and int(fields[3]) == sid:
            return True
    return False


def settled(store: SyncStore, run_id: int, shared: Path) -> None:
    """The run's end state: succeeded, one FINISH, a contiguous journal, the effect once."""
    run = store.read(lambda c: q.get_run(c, run_id))
    steps = store.read(lambda c: q.list_steps(c, run_id))
    assert run.status == RunStatus.SUCCEEDED, (run, [(s.seq, s.kind, s.status) for s in steps])
    assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
    assert [s.kind for s in steps].count(StepKind.FINISH) == 1
    lines = (shared / "effects.txt").read_text().splitlines()
    assert len(lines) == 1, lines


def test_frozen_daemon_is_taken_over_and_fences_itself_when_thawed(pair: Any) -> None:
    a, b, store, shared = pair
    a.start()
    run_id = start_run(store)
    spawned = wait_for(lambda: in_flight(store, run_id), "A's command in flight", a)
    wait_for(lambda: (shared / "holding").exists(), "A's command held", a)
    os.kill(a.pid, signal.SIGSTOP)  # A alone: its command runs on in its own session
    # B's own run of the command need not wait: let it through before B can start it (B may run
    # it before this test sees that B owns the run)
    (shared / "fast").touch()
    b.start()
    wait_for(lambda: b.owns(store.read(lambda c: q.get_run(c, run_id))), "B takes over", a, b)
    wait_for(
        lambda: store.read(lambda c: q.get_run(c, run_id)).status.finished, "the run ends", a, b
    )
    os.kill(a.pid, signal.SIGCONT)
    wait_for(lambda: a.events("lease.fenced"), "A fences itself", a)
    # Thawed, A either cancelled the run's task at its fence, or the task ran first and its
    # write was refused (B's epoch): either way A let it go, and wrote nothing after B. Both are
    # said as A gets to them on a loaded machine: waited for, not read once.
    wait_for(
        lambda: run_id in a.events("lease.fenced")[0]["runs"] or a.events("run.released"),
        "A lets the run go", a,
    )  # fmt: skip
    settled(store, run_id, shared)
    # A's command did not outlive the takeover (its session is ended by whoever fenced it: B's
    # takeover or A's own fence, the latter as A gets CPU again).
    wait_for(lambda: not session_alive(int(spawned["pgid"])), "A's command ended", a, b)
    settled(store, run_id, shared)  # and ended without its effect
    recovered = [
        s.result
        for s in store.read(lambda c: q.list_steps(c, run_id))
        if s.kind == StepKind.ACT and s.result
    ]
    assert recovered[0].get("recovered") == "verified not done; ran", recovered
    assert not a.events("run.taken_over")


def test_killed_daemon_run_resumes_on_the_other_and_a_restart_steals_nothing(pair: Any) -> None:
    a, b, store, shared = pair
    a.start()
    run_id = start_run(store)
    wait_for(lambda: in_flight(store, run_id), "A's command in flight", a)
    wait_for(lambda: (shared / "holding").exists(), "A's command held", a)
    (shared / "fast").touch()  # B's run of the command need not wait (A's is past its check)
    b.start()
    assert a.owns(store.read(lambda c: q.get_run(c, run_id)))
    killed_at = time.monotonic()
    os.killpg(a.pid, signal.SIGKILL)
    assert a.proc is not None
    a.proc.wait()
    wait_for(lambda: b.owns(store.read(lambda c: q.get_run(c, run_id))), "B resumes", b)
    took_s = time.monotonic() - killed_at
    a.start()  # same host, a new owner: it must not take the run back
    wait_for(
        lambda: store.read(lambda c: q.get_run(c, run_id)).status.finished, "the run ends", a, b
    )
    settled(store, run_id, shared)
    assert a.events("daemon.ready")[-1]["resumed"] == 0
    assert not a.events("run.taken_over")
    print(f"takeover after SIGKILL: {took_s:.1f}s (lease {LEASE_S}s)")
