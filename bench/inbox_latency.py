"""Inbox latency: from `agentd inbox approve ID` returning to the approved action executing.

    bench/inbox_latency.py --samples N --workdir DIR

One real daemon (`agentd serve`, JSON logs) serves a fresh home whose scripted model proposes a
gated command action (policy `approve`) and then finishes; the command appends a `date +%s.%N`
timestamp and its run id to a file. N+1 runs are created and left waiting on their approvals. For
each sample the real CLI approves one item as a subprocess; latency = the action's timestamp − the
wall time the CLI returned (it can be slightly negative when the daemon beats the CLI's exit).
Printed as is, never clamped: one RESULT line per sample, then the last item is approved while the
daemon is stopped and the time from daemon spawn to the action is reported, then a SUMMARY line.

The DaemonProcess class here is shared with bench/memory.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus, RunStatus

ROOT = Path(__file__).resolve().parent.parent
POLL_INTERVAL_S = (
    0.1  # the daemon's default; written explicitly so the figure says what it measured
)
T = TypeVar("T")

CONFIG = """\
[daemon]
poll_interval_s = {poll}

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.stamp]
type = "command"
description = "append the current time and the run id to the stamp file"
# No shell features beyond `sh -c`; the stamp file path is passed as $1, never spliced into code.
argv = ["sh", "-c", 'echo "$(date +%s.%N) $AGENTD_RUN_ID" >> "$1"', "stamp", {out}]

[agents.default]
description = "proposes one gated command, then finishes"
actions = ["stamp", "finish"]
policy = {{ rules = {{ stamp = "approve" }} }}
"""

REPLIES = [
    {"reason": "stamp the time", "action": {"kind": "stamp"}},
    {"reason": "stamped", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}},
]


def agentd_argv() -> list[str]:
    """The console script next to this interpreter (what an operator types), else `-m agentd`."""
    script = Path(sys.executable).with_name("agentd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentd"]


def result(**fields: Any) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


class DaemonDied(RuntimeError):
    """The daemon exited while the bench waited on it; the message carries its last log lines."""


class DaemonProcess:
    """One `agentd --home H serve` subprocess; a thread tees its JSON log to a file and notes
    when each event arrived. `stop()` (also on exit from `with`) sends SIGTERM, then SIGKILL."""

    def __init__(self, home: Path, log_path: Path) -> None:
        self.home = home
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[tuple[float, dict[str, Any]]] = []  # (wall time seen, event)
        self.spawned_at = 0.0
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        assert self.proc is not None, "start() first"
        return self.proc.pid

    def start(self) -> float:
        """Spawn the daemon; returns the wall time just before the spawn."""
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        with self._lock:
            self.events = []
        log_file = self.log_path.open("a")
        self.spawned_at = time.time()
        self.proc = subprocess.Popen(
            [*agentd_argv(), "--home", str(self.home), "serve"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        log_file.close()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True)
        self._reader.start()
        return self.spawned_at

    def _read(self, stream: IO[str]) -> None:
        with self.log_path.open("a") as out:
            for line in stream:
                seen = time.time()
                out.write(line)
                out.flush()
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = {"event": "(not json)", "text": line.rstrip()}
                with self._lock:
                    self.events.append((seen, event))

    def event(self, name: str, **match: Any) -> tuple[float, dict[str, Any]] | None:
        """The first logged `name` event whose fields include `match`, with when it was read."""
        with self._lock:
            for seen, e in self.events:
                if e.get("event") == name and all(e.get(k) == v for k, v in match.items()):
                    return seen, e
        return None

    def logged_at(self, name: str, **match: Any) -> float | None:
        """The daemon's own timestamp of an event (same clock as ours: same host)."""
        found = self.event(name, **match)
        return None if found is None else datetime.fromisoformat(found[1]["timestamp"]).timestamp()

    def tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text() if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> None:
        """Raise DaemonDied, with the log's tail, if the daemon has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise DaemonDied(
                f"daemon exited with code {self.proc.returncode}; last log lines "
                f"({self.log_path}):\n{self.tail()}"
            )

    def wait_for(self, probe: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
        """Poll `probe` until it returns something other than None, while the daemon lives."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = probe()
            if value is not None:
                return value
            self.alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout_s} s; log tail:\n{self.tail()}")
            time.sleep(0.002)

    def wait_ready(self, timeout_s: float = 60.0) -> tuple[float, dict[str, Any]]:
        return self.wait_for(lambda: self.event("daemon.ready"), "daemon.ready", timeout_s)

    def stop(self, timeout_s: float = 20.0) -> float | None:
        """SIGTERM and wait (SIGKILL after `timeout_s`); returns seconds to exit, None if not running."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return None
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            print(f"warning: daemon ignored SIGTERM for {timeout_s} s; killed", file=sys.stderr)
        if self._reader is not None:
            self._reader.join(5)
        return time.monotonic() - started


def exit_on_sigterm() -> None:
    """SIGTERM to the bench unwinds like Ctrl-C, so every `finally` stops its daemon."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


# ── the inbox latency bench ──────────────────────────────────────────────────────────────────


def make_home(home: Path, out: Path) -> None:
    home.mkdir(parents=True)
    text = CONFIG.format(poll=POLL_INTERVAL_S, out=json.dumps(str(out)))
    (home / "config.toml").write_text(text)
    (home / "replies.json").write_text(json.dumps(REPLIES))


def create_runs(store: SyncStore, n: int) -> list[int]:
    """N goals with one run each, in one transaction (the daemon adopts unowned running runs)."""

    def work(c: Any) -> list[int]:
        runs = []
        for i in range(n):
            goal_id = q.add_goal(
                c, title=f"latency {i}", why="bench", agent="default", criteria=[], deadline=None
            )
            runs.append(q.create_run(c, goal_id=goal_id, agent="default", trigger="bench"))
        return runs

    return store.write(work)


def approvals_waiting(store: SyncStore, run_ids: list[int]) -> dict[int, int] | None:
    """run_id → open approval item_id, once every run waits on one; else None."""

    def read(c: Any) -> dict[int, int] | None:
        items = {
            i.run_id: i.item_id
            for i in qi.list_items(c, status=InboxStatus.OPEN)
            if i.kind == InboxKind.APPROVAL
        }
        runs = [q.get_run(c, r) for r in run_ids]
        if all(r.status == RunStatus.WAITING and r.run_id in items for r in runs):
            return {r: items[r] for r in run_ids}
        return None

    return store.read(read)


def stamps(out: Path) -> dict[int, float]:
    """run_id → the time its stamp action ran (the first, if one ever ran twice)."""
    seen: dict[int, float] = {}
    if out.exists():
        for line in out.read_text().splitlines():
            ts, _, run_id = line.partition(" ")
            if run_id.strip().isdigit():
                seen.setdefault(int(run_id), float(ts))
    return seen


def approve(home: Path, item_id: int) -> tuple[float, float, str]:
    """Run the real CLI; returns (wall time it returned, its duration in s, its stdout)."""
    started = time.time()
    done = subprocess.run(
        [*agentd_argv(), "--home", str(home), "inbox", "approve", str(item_id)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    returned = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"agentd inbox approve {item_id} failed: {done.stderr.strip()}")
    return returned, returned - started, done.stdout.strip()


def resolved_at(store: SyncStore, item_id: int) -> float:
    """When the CLI's approval transaction wrote its row (just before its commit)."""
    item = store.read(lambda c: qi.get_item(c, item_id))
    assert item.resolved_at is not None, f"item {item_id} is not resolved"
    return item.resolved_at.timestamp()


def finished(store: SyncStore, run_id: int) -> bool | None:
    return True if store.read(lambda c: q.get_run(c, run_id)).status.finished else None


def sample(
    daemon: DaemonProcess, store: SyncStore, out: Path, run_id: int, item_id: int
) -> dict[str, Any]:
    # A random phase against the daemon's poll tick, so the samples do not all land alike.
    time.sleep(random.uniform(0, POLL_INTERVAL_S))
    returned, cli_s, _ = approve(daemon.home, item_id)
    acted = daemon.wait_for(lambda: stamps(out).get(run_id), f"stamp of run {run_id}", 10)
    committed = resolved_at(store, item_id)
    woken = daemon.wait_for(lambda: daemon.logged_at("run.woken", run_id=run_id), "run.woken", 10)
    daemon.wait_for(lambda: finished(store, run_id), f"run {run_id} finishing", 10)
    return {
        "latency_ms": round((acted - returned) * 1000, 1),
        "from_commit_ms": round((acted - committed) * 1000, 1),
        "commit_to_woken_ms": round((woken - committed) * 1000, 1),
        "woken_to_action_ms": round((acted - woken) * 1000, 1),
        "cli_ms": round(cli_s * 1000, 1),
        "run_id": run_id,
        "item_id": item_id,
    }


def approved_while_stopped(
    daemon: DaemonProcess, store: SyncStore, out: Path, run_id: int, item_id: int
) -> dict[str, Any]:
    stop_s = daemon.stop()
    _, _, said = approve(daemon.home, item_id)
    spawned = daemon.start()
    acted = daemon.wait_for(lambda: stamps(out).get(run_id), f"stamp of run {run_id}", 30)
    ready_seen, ready = daemon.wait_ready()
    daemon.wait_for(lambda: finished(store, run_id), f"run {run_id} finishing", 10)
    return {
        "mode": "approved_while_stopped",
        "start_to_action_ms": round((acted - spawned) * 1000, 1),
        "start_to_ready_ms": round((ready_seen - spawned) * 1000, 1),
        "ready_to_action_ms": round((acted - ready_seen) * 1000, 1),
        "daemon_startup_ms": ready.get("startup_ms"),
        "stop_s": None if stop_s is None else round(stop_s, 3),
        "cli_said": said,
        "run_id": run_id,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    if a.samples < 1:
        ap.error("--samples must be at least 1")
    exit_on_sigterm()
    workdir = a.workdir.resolve() / "inbox-latency"
    shutil.rmtree(workdir, ignore_errors=True)
    home, out = workdir / "home", workdir / "stamps.txt"
    make_home(home, out)
    store = SyncStore(home / "agentd.db")
    try:
        with DaemonProcess(home, workdir / "daemon.log") as daemon:
            daemon.start()
            daemon.wait_ready()
            run_ids = create_runs(store, a.samples + 1)
            items = daemon.wait_for(
                lambda: approvals_waiting(store, run_ids), "all runs waiting on approvals", 60
            )
            latencies: list[float] = []
            from_commit: list[float] = []
            for i, run_id in enumerate(run_ids[:-1]):
                figures = sample(daemon, store, out, run_id, items[run_id])
                latencies.append(figures["latency_ms"])
                from_commit.append(figures["from_commit_ms"])
                result(sample=i, **figures)
            last = run_ids[-1]
            stopped = approved_while_stopped(daemon, store, out, last, items[last])
            result(**stopped)
    finally:
        store.close()
    print(
        f"SUMMARY median_ms={statistics.median(latencies):.1f} "
        f"p90_ms={percentile(latencies, 90):.1f} max_ms={max(latencies):.1f} "
        f"from_commit_median_ms={statistics.median(from_commit):.1f} "
        f"from_commit_max_ms={max(from_commit):.1f} "
        f"stopped_start_to_action_ms={stopped['start_to_action_ms']:.1f} "
        f"(target: median < 250 ms, worst < 1000 ms)",
        flush=True,
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the daemon was stopped on the way out
        sys.exit(130)
