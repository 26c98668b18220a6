"""Inbound hooks: how fast a real daemon accepts deliveries, and what a burst costs running runs.

    bench/hooks.py --deliveries 2000 --senders 50 --samples 20 --runs 100 --workdir DIR

One real `agentd serve` (JSON logs, the product's defaults but for a generous hook rate) serves a
fresh home with two bearer-token json hooks on its `[api] port`: `tok` (event `deploy`, which no
agent triggers on) and `go` (event `go`, the trigger of the agent `default`; its runs ask and
wait). Printed, one RESULT line each, then a SUMMARY:

- `seq`: `--deliveries` deliveries one after another on one kept-alive connection: deliveries/s,
  and p50/p99 of a delivery (request sent → committed → 2xx read);
- `conc`: the same number from `--senders` concurrent senders (a connection each);
- `trigger`: `--samples` deliveries to `go`, one at a time, each for a new goal: webhook sent →
  run created (the run's `created_at` on the same host's clock; median);
- `busy`: `--runs` runs each journaling steps as fast as they can (an `allow`ed no-op command, again
  and again, max_concurrent_runs = runs): their steps per second over a quiet window, then over the
  window of a `conc` burst — the two side by side.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import poke
from agentd.db import queries as q
from agentd.db.store import SyncStore

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789"  # noqa: S105  # the bench daemon's own, in its env only
CONFIG = """
[daemon]
max_concurrent_runs = {runs}

[api]
port = {port}

[hooks.tok]
type = "json"
token_env = "BENCH_HOOK_TOKEN"
event = "deploy"
rate_per_minute = 1000000

[hooks.go]
type = "json"
token_env = "BENCH_HOOK_TOKEN"
event = "go"
rate_per_minute = 1000000

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.noop]
type = "command"
argv = ["true"]

[agents.default]
actions = ["finish"]
triggers = ["go"]

[agents.busy]
actions = ["noop", "finish"]

[agents.busy.limits]
max_steps = 100000
loop_threshold = 100000
"""
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
NOOP = {"reason": "again", "action": {"kind": "noop"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(conn: http.client.HTTPConnection, hook: str, msg_id: str) -> float:
    """One delivery on `conn`; its latency in seconds (request → 2xx read)."""
    headers = {"Authorization": f"Bearer {TOKEN}", "webhook-id": msg_id,
               "Content-Type": "application/json"}  # fmt: skip
    if conn.sock is None:  # http.client sends the head and the body apart: without this, Nagle
        conn.connect()  # and the peer's delayed ACK add ~40 ms to every request on Linux
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    started = time.perf_counter()
    conn.request("POST", f"/hooks/{hook}", body=json.dumps({"id": msg_id}), headers=headers)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise SystemExit(f"delivery {msg_id}: HTTP {response.status}")
    return time.perf_counter() - started


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def result(**figures: Any) -> None:
    print("RESULT " + json.dumps(figures), flush=True)


def seq(port: int, n: int, tag: str) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    lat = [post(conn, "tok", f"{tag}-{i}") for i in range(n)]
    elapsed = time.perf_counter() - started
    conn.close()
    return {"per_s": n / elapsed, "p50_ms": pct(lat, 0.5) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3}


def conc(port: int, n: int, senders: int, tag: str) -> dict[str, float]:
    lat: list[float] = []
    lock = threading.Lock()

    def sender(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = [post(conn, "tok", f"{tag}-{k}-{i}") for i in range(k, n, senders)]
        conn.close()
        with lock:
            lat.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(sender, range(senders)))
    elapsed = time.perf_counter() - started
    return {"per_s": n / elapsed, "p50_ms": pct(lat, 0.5) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3}


def store_home(store: SyncStore) -> Path:
    return Path(str(store.path)).parent


def steps_done(store: SyncStore) -> int:
    return int(store.read(lambda c: c.execute("SELECT count(*) FROM steps").fetchone()[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--senders", type=int, default=50)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--workdir", type=Path, default=ROOT / ".bench")
    args = parser.parse_args()
    home = args.workdir / "hooks"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    port = free_port()
    (home / "config.toml").write_text(CONFIG.format(port=port, runs=args.runs))
    (home / "replies.json").write_text(json.dumps({"decide": [NOOP] * 100_000}))
    env = {**os.environ, "AGENTD_LOG_FORMAT": "json", "BENCH_HOOK_TOKEN": TOKEN}
    agentd = [sys.executable, "-m", "agentd", "--home", str(home)]
    subprocess.run([*agentd, "init"], env=env, capture_output=True, check=False)
    (home / "config.toml").write_text(CONFIG.format(port=port, runs=args.runs))
    log = (home / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [*agentd, "serve"], stdout=log, stderr=log, env=env, start_new_session=True
    )
    store = SyncStore(home / "agentd.db")
    try:
        while '"daemon.ready"' not in (home / "daemon.log").read_text():
            if daemon.poll() is not None:
                raise SystemExit((home / "daemon.log").read_text()[-3000:])
            time.sleep(0.05)
        figures: dict[str, Any] = {}
        s = seq(port, args.deliveries, "seq")
        result(phase="seq", deliveries=args.deliveries, **s)
        c = conc(port, args.deliveries, args.senders, "conc")
        result(phase="conc", deliveries=args.deliveries, senders=args.senders, **c)
        figures.update(seq_per_s=s["per_s"], seq_p50_ms=s["p50_ms"], seq_p99_ms=s["p99_ms"],
                       conc_per_s=c["per_s"], conc_p50_ms=c["p50_ms"], conc_p99_ms=c["p99_ms"])  # fmt: skip
        figures["trigger_median_ms"] = trigger(store, port, args.samples)
        figures.update(busy(store, port, args))
        print("SUMMARY " + " ".join(f"{k}={v:.1f}" for k, v in figures.items()), flush=True)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(60)
        store.close()


def trigger(store: SyncStore, port: int, samples: int) -> float:
    """Webhook → run created, `samples` times, each for a goal of its own (one run per goal)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    took = []
    for i in range(samples):
        goal_id = store.write(
            lambda c: q.add_goal(
                c, title="bench", why="bench", agent="default", criteria=[], deadline=None
            )
        )
        sent = time.time()
        post(conn, "go", f"go-{i}")
        while not (runs := store.read(lambda c, g=goal_id: q.list_runs(c, goal_id=g, limit=1))):
            time.sleep(0.002)
        took.append((runs[0].created_at.timestamp() - sent) * 1e3)
        result(phase="trigger", sample=i, ms=took[-1])
    conn.close()
    return statistics.median(took)


def busy(store: SyncStore, port: int, args: argparse.Namespace) -> dict[str, float]:
    """Steps per second of `--runs` busy runs, quiet and during a burst."""

    def work(c: Any) -> None:
        goal_id = q.add_goal(c, title="busy", why="bench", agent="busy", criteria=[], deadline=None)
        for _ in range(args.runs):
            q.create_run(c, goal_id=goal_id, agent="busy", trigger="bench")

    store.write(work)
    poke.poke(store_home(store) / "api.sock")  # as the CLI does after a write: the daemon looks now
    base = steps_done(store)
    while steps_done(store) < base + 4 * args.runs:  # all of them under way
        time.sleep(0.05)
    first = steps_done(store)
    time.sleep(args.window_s)
    quiet = (steps_done(store) - first) / args.window_s
    first, started = steps_done(store), time.perf_counter()
    c = conc(port, args.deliveries, args.senders, "busy")
    elapsed = time.perf_counter() - started
    during = (steps_done(store) - first) / elapsed
    result(phase="busy", runs=args.runs, quiet_steps_per_s=quiet, burst_steps_per_s=during, **c)
    return {"busy_quiet_steps_per_s": quiet, "busy_burst_steps_per_s": during,
            "busy_burst_per_s": c["per_s"], "busy_burst_p99_ms": c["p99_ms"]}  # fmt: skip


if __name__ == "__main__":
    main()
