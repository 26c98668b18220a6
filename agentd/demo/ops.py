"""`agentd demo`: a real checkout service breaks; a background agent notices, asks, acts, finishes.

Creates a throw-away home, starts the demo service and a daemon as real processes, deploys a bad
version and narrates the run the watcher starts. The rollback is gated: it waits in the inbox until
approved (from another terminal, by typing `y` here, or by `--yes`); with `--recover` the service
heals while the approval waits, and the approval is withdrawn. Every process the demo started is
stopped on exit, Ctrl-C, SIGTERM or SIGHUP (a closed terminal: the children run in their own
sessions, so only the demo hears it). A temporary home is removed at the end unless `keep`; a home
the operator named is always kept. Commands it prints name the `agentd` that is running, so they
work as printed (`.venv/bin/agentd` after `make demo`).
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from agentd import config
from agentd.demo import build as demo_build
from agentd.models import InboxItem, InboxKind, InboxStatus, Run, Step, utcnow
from agentd.operator import evidence, goals, inbox, runs
from agentd.operator.home import HomeStore, open_store
from agentd.views import evidence as render_evidence
from agentd.views import runs as render_runs

AGENT = "checkout-watch"
STARTUP_TIMEOUT_S = 15.0
RUN_TIMEOUT_S = 60.0


def demo_config(service_dir: Path, port: int) -> str:
    svc = f'"{sys.executable}", "-m", "agentd.demo.service"'
    state = f'"--state", "{service_dir}"'
    return f"""\
# Written by `agentd demo`: a background agent that keeps the demo checkout service healthy.
[daemon]
poll_interval_s = 0.05

# The embedded runbook decides (no API key). Swap in a real model here; nothing else changes.
[models.default]
provider = "runbook"
health_source = "health"
healthy_checks = 2
recheck_s = 1.0

[sources.health]
type = "http"
url = "http://127.0.0.1:{port}/health"
timeout_s = 2.0

[sources.service_log]
type = "file_tail"
path = "{service_dir / "service.log"}"
lines = 6

[sources.deployed]
type = "command"
argv = [{svc}, "version", {state}]

[actions.fetch_logs]
type = "command"
description = "Read the last 20 lines of the checkout log."
argv = ["tail", "-n", "20", "{service_dir / "service.log"}"]
idempotent = true

[actions.restart]
type = "command"
description = "Restart the checkout service."
argv = [{svc}, "restart", {state}]
idempotent = true

[actions.rollback]
type = "command"
description = "Roll the checkout service back to its previous version."
argv = [{svc}, "rollback", {state}]
verify_argv = [{svc}, "verify-rollback", {state}]
idempotent = false

[actions.sleep]
type = "sleep"
max_sleep_s = 60.0

[agents.{AGENT}]
description = "Keeps the checkout service healthy. Rollbacks need an operator's approval."
sources = ["health", "service_log", "deployed"]
actions = ["fetch_logs", "restart", "rollback", "sleep", "notify", "ask", "finish"]
triggers = ["health.unhealthy", "alert"]
watch = {{ interval_s = 0.5 }}

[agents.{AGENT}.policy]
rules = {{ rollback = "approve" }}
max_per_hour = {{ restart = 3, rollback = 2 }}
expire = {{ approval = {{ after_s = 900, on_expire = "deny" }} }}
"""


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
        with (self.home / log_name).open("ab") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )  # fmt: skip
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
                "agentd.demo.service",
                "serve",
                "--state",
                str(self.service_dir),
            ],
            "service.out",
        )
        port_file = self.service_dir / "port"
        _until(lambda: port_file.exists() and port_file.read_text().strip(), "the service's port")
        port = int(port_file.read_text())
        _until(
            lambda: _http_status(f"http://127.0.0.1:{port}/health") == 200, "the service to answer"
        )
        return port

    def service(self, *args: str) -> None:
        """Run one of the demo service's commands (deploy, heal…) against its state."""
        argv = [
            sys.executable,
            "-m",
            "agentd.demo.service",
            *args,
            "--state",
            str(self.service_dir),
        ]
        subprocess.run(argv, check=True, capture_output=True)

    def start_daemon(self) -> None:
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        self.spawn(
            [sys.executable, "-m", "agentd", "--home", str(self.home), "serve"], "daemon.log", env
        )
        log = self.home / "daemon.log"
        _until(lambda: log.exists() and "daemon.ready" in log.read_text(), "the daemon to be ready")


def agentd_command() -> str:
    """How to run this same agentd from the operator's shell: `agentd` when that is what PATH
    finds, else the script's path (`.venv/bin/agentd`), else `python -m agentd`."""
    script = Path(sys.argv[0])
    if script.name != "agentd" or not script.exists():
        return f"{shlex.quote(sys.executable)} -m agentd"
    on_path = shutil.which("agentd")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "agentd"
    shown = os.path.relpath(script) if not script.is_absolute() else str(script)
    return shlex.quote(shown)


class Signalled(Exception):
    """SIGTERM or SIGHUP reached the demo: stop its processes as Ctrl-C does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _on_signal(signum: int, frame: Any) -> None:
    raise Signalled(signum)


def main(
    home: Path | None,
    yes: bool,
    recover: bool = False,
    out: TextIO = sys.stdout,
    keep: bool = False,
    build: bool = False,
) -> int:
    """Run the demo; `recover` is the variant where the service heals while approval waits.
    A temporary home (no `home` given) is removed at the end unless `keep`."""
    temporary = home is None
    home = home or Path(tempfile.mkdtemp(prefix="agentd-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    demo = Demo(home, out)
    handlers = threading.current_thread() is threading.main_thread()
    if handlers:
        for sig in STOP_SIGNALS:
            signal.signal(sig, _on_signal)
    try:
        return _run(demo, yes=yes and not recover, recover=recover, build=build)
    except KeyboardInterrupt:
        demo.say("\ninterrupted; stopping the demo's processes")
        return 130
    except Signalled as e:
        demo.say(f"\n{e}; stopping the demo's processes")
        return 128 + e.signum
    finally:
        if handlers:  # a second signal must not cut the clean-up short
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        demo.stop_all()
        _leave(demo, remove=temporary and not keep)
        if handlers:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)


def _leave(demo: Demo, *, remove: bool) -> None:
    if remove:
        shutil.rmtree(demo.home, ignore_errors=True)
        demo.say(
            f"\nRemoved the demo's home {demo.home} (`{agentd_command()} demo --keep` keeps it)"
        )
        return
    demo.say(
        f"\nThe demo's home is kept: explore it with  {agentd_command()} --home "
        f"{shlex.quote(str(demo.home))} runs show 1"
    )


def _run(demo: Demo, *, yes: bool, recover: bool, build: bool = False) -> int:
    t0 = time.monotonic()
    demo.say(f"agentd demo — home {demo.home}")
    port = demo.start_service()
    health = f"http://127.0.0.1:{port}/health"
    demo.say(f"• checkout service up on 127.0.0.1:{port} (version v1, /health = 200)")
    demo.paths.config.write_text(
        demo_config(demo.service_dir, port) + demo_build.BUILD_CONFIG.format(agent=AGENT)
    )
    store = open_store(demo.paths.db)
    demo.start_daemon()
    demo.say("• daemon started; the embedded runbook decides (no API key needed)")
    goal_id = goals.add(
        store,
        title="Keep checkout healthy",
        why="Checkout is revenue; 5xx loses orders.",
        agent=AGENT,
        criteria=["/health returns 200"],
    ).goal_id
    demo.say(f"• goal {goal_id}: Keep checkout healthy — agent {AGENT} looks every 0.5 s")
    _until(lambda: runs.world_snapshots(store) > 0, "the first look at the service")
    demo.service("deploy", "v2-bad")
    demo.say(f"• bad deploy v2-bad: /health now {_http_status(health)}; the watcher will notice\n")
    run = _narrate(demo, store, goal_id, t0, yes=yes, recover=recover)
    notice = _final_notice(store, run)
    ok = run is not None and run.status == "succeeded"
    if notice:
        demo.say(f"\n  inbox notice: {notice}")
    if build and run is not None:
        ok = demo_build.run(store, goal_id, run, demo.say, t0) and ok
    store.close()
    demo.say(
        f"\nrun {'succeeded' if ok else 'did not succeed'}; /health = {_http_status(health)}; "
        f"{time.monotonic() - t0:.1f}s in all"
    )
    return 0 if ok else 1


def _final_notice(store: HomeStore, run: Run | None) -> str:
    if run is None:
        return ""
    items = inbox.items_of_run(store, run.run_id, show_all=True)
    return next((n.body for n in reversed(items) if n.kind == InboxKind.NOTICE), "")


def _narrate(
    demo: Demo, store: HomeStore, goal_id: int, t0: float, *, yes: bool, recover: bool
) -> Run | None:
    shown: dict[int, str] = {}  # seq → status printed, so a finished action is printed again
    asked: set[int] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        found = runs.list_runs(store, goal_id=goal_id)
        if not found:
            time.sleep(0.05)
            continue
        run = found[-1]
        steps: list[Step] = runs.steps_of(store, run.run_id)
        for step in steps:
            if shown.get(step.seq) != step.status:
                demo.say(f"  {time.monotonic() - t0:5.1f}s  {render_runs.step_line(step)}")
                shown[step.seq] = step.status
        if run.status.finished:
            return run
        items = inbox.items_of_run(store, run.run_id)
        for item in items:
            if item.kind == InboxKind.APPROVAL and item.item_id not in asked:
                asked.add(item.item_id)
                _show_approval(demo, store, item)
                if recover:
                    demo.service("heal")
                    demo.say("     --recover: the payment backend comes back by itself\n")
                else:
                    _answer_approval(demo, store, item.item_id, yes)
        time.sleep(0.05)
    demo.say(f"the run did not finish within {RUN_TIMEOUT_S:g}s")
    return None


def _show_approval(demo: Demo, store: HomeStore, item: InboxItem) -> None:
    """The evidence an operator needs, as `agentd inbox show` heads it: agentd's own summary of
    the failing check, the deploy, the log and the run's last actions (not the model's words)."""
    demo.say(f"\n  ⏸  approval needed (inbox item {item.item_id}): {item.action} {item.args or {}}")
    demo.say(f"     gated by: {item.rule}")
    demo.say(f"     why (the model's words): {item.data.get('reason', '')}")
    summary = evidence.of_item(store, item)
    width = min(shutil.get_terminal_size((100, 40)).columns, 120) - 5
    for line in render_evidence.lines(summary or {}, utcnow(), width):
        demo.say(f"     {line}")
    home = shlex.quote(str(demo.home))
    demo.say(f"     in full:    {agentd_command()} --home {home} inbox show {item.item_id}")
    demo.say(f"     answer it:  {agentd_command()} --home {home} inbox approve {item.item_id}")


def _answer_approval(demo: Demo, store: HomeStore, item_id: int, yes: bool) -> None:
    if yes:
        demo.say("     --yes: approving through the inbox\n")
        cfg = config.load(demo.paths.config)
        inbox.approve(store, cfg, item_id, note="approved by agentd demo --yes")
        return
    if not sys.stdin.isatty():
        demo.say("     (waiting for the answer)\n")
        return
    demo.say("     …or type y here and press Enter (anything else denies):")
    while True:
        current = inbox.get_item(store, item_id)
        if current.status != InboxStatus.OPEN:
            demo.say(f"     answered elsewhere: {current.status}\n")
            return
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            line = sys.stdin.readline().strip().lower()
            if line in ("y", "yes"):
                cfg = config.load(demo.paths.config)
                inbox.approve(store, cfg, item_id, note="approved at the demo prompt")
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
