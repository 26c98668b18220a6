"""`agentd demo`: a real checkout service breaks; a background agent notices, asks, acts, finishes.

Creates a throw-away home, starts the demo service and a daemon as real processes, deploys a bad
version, raises an alert, and narrates the run's journal live. The rollback is gated: it waits in the
inbox until approved (from another terminal, by typing `y` here, or by `--yes`). Every process the
demo started is stopped on exit or Ctrl-C; the home is left for exploring.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from agentd import config, inbox, render
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus, Run, Step

AGENT = "checkout-watch"
STARTUP_TIMEOUT_S = 15.0
RUN_TIMEOUT_S = 60.0


def demo_config(service_dir: Path, port: int) -> str:
    svc = f'"{sys.executable}", "-m", "agentd.demo_service"'
    return f"""\
# Written by `agentd demo`: a watcher for the demo checkout service.
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.health]
type = "http"
url = "http://127.0.0.1:{port}/health"
timeout_s = 2.0

[sources.service_log]
type = "file_tail"
path = "{service_dir / "service.log"}"
lines = 5

[actions.rollback]
type = "command"
description = "Roll the checkout service back to its previous version."
argv = [{svc}, "rollback", "--state", "{service_dir}"]
verify_argv = [{svc}, "verify-rollback", "--state", "{service_dir}"]
idempotent = false

[actions.sleep]
type = "sleep"
max_sleep_s = 60.0

[agents.{AGENT}]
description = "Keeps the checkout service healthy. Rollbacks need an operator's approval."
sources = ["health", "service_log"]
actions = ["rollback", "sleep", "notify", "finish"]
triggers = ["alert"]

[agents.{AGENT}.policy]
rules = {{ rollback = "approve" }}
"""


REPLIES: list[dict[str, Any]] = [
    {
        "reason": "Health fails with 500 since the v2-bad deploy; the log shows payment timeouts. "
        "Rolling back to the previous version is the fastest fix.",
        "action": {"kind": "rollback"},
    },
    {
        "reason": "Give the service a moment, then check health again.",
        "action": {"kind": "sleep", "seconds": 1},
    },
    {
        "reason": "Health is back to 200 on the previous version.",
        "action": {
            "kind": "finish",
            "outcome": "succeeded",
            "summary": "Checkout failed after deploying v2-bad (HTTP 500, payment timeouts). "
            "Rolled back to v1 with approval; health is 200 again.",
        },
    },
]


class Demo:
    def __init__(self, home: Path, out: TextIO) -> None:
        self.home = home
        self.paths = config.Paths(home)
        self.service_dir = home / "service"
        self.out = out
        self.procs: list[subprocess.Popen[bytes]] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def spawn(
        self, argv: list[str], log_name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = (self.home / log_name).open("ab")
        proc = subprocess.Popen(
            argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    def start_service(self) -> int:
        self.service_dir.mkdir(parents=True)
        self.spawn(
            [
                sys.executable,
                "-m",
                "agentd.demo_service",
                "serve",
                "--state",
                str(self.service_dir),
            ],
            "service.out",
        )
        port_file = self.service_dir / "port"
        _until(port_file.exists, "the demo service to listen")
        port = int(port_file.read_text())
        _until(
            lambda: _http_status(f"http://127.0.0.1:{port}/health") == 200, "the service to answer"
        )
        return port

    def start_daemon(self) -> None:
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        self.spawn(
            [sys.executable, "-m", "agentd", "--home", str(self.home), "serve"], "daemon.log", env
        )
        log = self.home / "daemon.log"
        _until(lambda: log.exists() and "daemon.ready" in log.read_text(), "the daemon to be ready")


def main(home: Path | None, yes: bool, out: TextIO = sys.stdout) -> int:
    home = home or Path(tempfile.mkdtemp(prefix="agentd-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    demo = Demo(home, out)
    try:
        return _run(demo, yes)
    except KeyboardInterrupt:
        demo.say("\ninterrupted; stopping the demo's processes")
        return 130
    finally:
        demo.stop_all()
        demo.say(f"\nThe demo's home is kept: explore it with  agentd --home {home} runs show 1")


def _run(demo: Demo, yes: bool) -> int:
    t0 = time.monotonic()
    demo.say(f"agentd demo — home {demo.home}")
    port = demo.start_service()
    demo.say(f"• checkout service up on 127.0.0.1:{port} (version v1, /health = 200)")
    demo.paths.config.write_text(demo_config(demo.service_dir, port))
    (demo.home / "replies.json").write_text(json.dumps(REPLIES, indent=1))
    store = SyncStore(demo.paths.db)
    demo.start_daemon()
    demo.say("• daemon started (scripted model: no API key needed)")
    goal_id = store.write(
        lambda c: q.add_goal(
            c,
            title="Keep checkout healthy",
            why="Checkout is revenue; 5xx loses orders.",
            agent=AGENT,
            criteria=["/health returns 200"],
            deadline=None,
        )
    )
    demo.say(f"• goal {goal_id}: Keep checkout healthy (agent {AGENT})")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "agentd.demo_service",
            "deploy",
            "--state",
            str(demo.service_dir),
            "v2-bad",
        ],
        check=True,
    )
    demo.say(f"• bad deploy v2-bad: /health now {_http_status(f'http://127.0.0.1:{port}/health')}")
    store.write(
        lambda c: qi.add_event(
            c, "alert", {"service": "checkout", "check": "health"}, "demo-alert-1", "demo"
        )
    )
    demo.say("• alert raised → the agent starts a run\n")
    run = _narrate(demo, store, goal_id, yes, t0)
    store.close()
    ok = run is not None and run.status == "succeeded"
    status_now = _http_status(f"http://127.0.0.1:{port}/health")
    demo.say(
        f"\nrun {'succeeded' if ok else 'did not succeed'}; /health = {status_now}; "
        f"{time.monotonic() - t0:.1f}s in all"
    )
    return 0 if ok else 1


def _narrate(demo: Demo, store: SyncStore, goal_id: int, yes: bool, t0: float) -> Run | None:
    shown: dict[int, str] = {}  # seq → status printed, so a finished action is printed again
    asked: set[int] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        runs = store.read(lambda c: q.list_runs(c, goal_id=goal_id))
        if not runs:
            time.sleep(0.05)
            continue
        run = runs[-1]
        run_id = run.run_id
        steps: list[Step] = store.read(functools.partial(q.list_steps, run_id=run_id))
        for step in steps:
            if shown.get(step.seq) != step.status:
                demo.say(f"  {time.monotonic() - t0:5.1f}s  {render.step_line(step)}")
                shown[step.seq] = step.status
        if run.status.finished:
            return run
        for item in store.read(functools.partial(qi.list_items, status="open", run_id=run_id)):
            if item.kind == InboxKind.APPROVAL and item.item_id not in asked:
                asked.add(item.item_id)
                _ask_approval(demo, store, item.item_id, yes)
        time.sleep(0.05)
    demo.say(f"the run did not finish within {RUN_TIMEOUT_S:g}s")
    return None


def _ask_approval(demo: Demo, store: SyncStore, item_id: int, yes: bool) -> None:
    item = store.read(lambda c: qi.get_item(c, item_id))
    cmd = f"agentd --home {demo.home} inbox approve {item_id}"
    demo.say(f"\n  ⏸  approval needed (inbox item {item_id}): {item.action} {item.args or {}}")
    demo.say(f"     gated by: {item.rule}")
    demo.say(f"     evidence: {item.data.get('reason', '')}")
    demo.say(f"     answer from another terminal:  {cmd}")
    if yes:
        demo.say("     --yes: approving through the inbox\n")
        inbox.approve(
            store, config.load(demo.paths.config), item_id, note="approved by agentd demo --yes"
        )
        return
    if not sys.stdin.isatty():
        demo.say("     (waiting for the answer)\n")
        return
    demo.say(
        "     …or type y here and press Enter: ",
    )
    while True:
        current = store.read(lambda c: qi.get_item(c, item_id))
        if current.status != InboxStatus.OPEN:
            demo.say(f"     answered elsewhere: {current.status}\n")
            return
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            line = sys.stdin.readline().strip().lower()
            if line in ("y", "yes"):
                inbox.approve(
                    store,
                    config.load(demo.paths.config),
                    item_id,
                    note="approved at the demo prompt",
                )
            else:
                inbox.deny(store, item_id, reason=f"operator typed {line!r} at the demo prompt")
            return


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 -- loopback URL we built
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def _until(pred: Any, what: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
