"""Telemetry's cost: the journal's step with metrics (always on) and with tracing off and on,
seq and conc side by side in one run; and `GET /metrics` render time and size on a big home.

    bench/telemetry.py steps   [--runs K] [--steps M] [--reps R] [--workdir DIR]
    bench/telemetry.py metrics [--goals G] [--waiting N] [--reps R] [--workdir DIR]

`steps` drives bench/journal.py's step (an idempotent no-op action journaled through the engine's
store and query) three ways: `bare` (as journal.py), `metrics` (plus what the engine reports per
step: the step and action counters, the commit → action histogram), and `tracing` (plus a step
span, an action span and the traceparent, exported over OTLP/HTTP to a collector in another process
that reads and drops the bodies: tests/telemetry/otlp_receiver.py). Repetitions interleave the
variants; medians are printed, and how many spans the exporter dropped (0: every span was sent).

`metrics` fills a SQLite home with G goals and N waiting runs (and an open approval per goal), then
times the home-wide read (agentd/db/metrics.py) and the render (agentd/telemetry/home.py) of one
scrape, and prints the body's size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.config import TracingConfig
from agentd.db import leases
from agentd.db import metrics as qm
from agentd.db import queries as q
from agentd.db.conn import Conn
from agentd.db.sqlite.connection import connect
from agentd.db.store import Store
from agentd.models import StepKind
from agentd.telemetry import home
from agentd.telemetry.meter import Meter, Names
from agentd.telemetry.tracing import Tracing
from bench.journal import noop


async def one_run(store: Store, run_id: int, epoch: int, steps: int, variant: str,
                  meter: Meter, tracing: Tracing) -> None:  # fmt: skip
    for i in range(steps):
        seq = i + 2
        if variant == "bare":
            result = await noop(i)
        else:
            with tracing.step(run_id, 1, seq):
                committed = time.monotonic()
                with tracing.child("action noop", **{"agentd.action": "noop"}):
                    tracing.traceparent()
                    result = await noop(i)
                meter.action("noop", "ok", time.monotonic() - committed)
                meter.step("act", "done")
        _step, row = q.step_insert(run_id, epoch, StepKind.ACT, seq, action="noop", args={},
                                   result=result)  # fmt: skip
        await store.insert(row)


async def timed(
    workdir: Path, runs: int, steps: int, variant: str, tracing: Tracing
) -> tuple[float, float]:
    """Wall seconds of the steps, and the process's CPU seconds (every thread: the writer's, the
    export thread's, counted until the exporter has taken every span of this repetition)."""
    db = workdir / "agentd.db"
    for p in workdir.glob("agentd.db*"):
        p.unlink()
    connect(db).close()
    store = Store(db)
    await store.open()

    def setup(c: Conn) -> list[tuple[int, int]]:
        goal_id = q.add_goal(
            c, title="bench", why="bench", agent="bench", criteria=[], deadline=None
        )
        ids = [
            q.create_run(c, goal_id=goal_id, agent="bench", trigger="bench") for _ in range(runs)
        ]
        return [(r, leases.claim_run(c, r, "bench", 3600)) for r in ids]

    pairs = await store.write(setup)
    meter = Meter(Names(actions=["noop"]))
    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one_run(store, r, e, steps, variant, meter, tracing) for r, e in pairs))
    elapsed = time.perf_counter() - start
    if (
        getattr(tracing, "sink", None) is not None
    ):  # the spans still queued are this repetition's cost too
        tracing.sink.wake.set()
        while tracing.sink.queue:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # the last batch's encoding and post
    cpu = time.process_time() - cpu
    await store.close()
    return elapsed, cpu


def steps_bench(a: argparse.Namespace) -> None:
    receiver = subprocess.Popen([sys.executable, "-m", "tests.telemetry.otlp_receiver"],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert receiver.stdout is not None
    endpoint = receiver.stdout.readline().strip()
    traced = Meter()
    tracing = Tracing.start(TracingConfig(enabled=True, endpoint=endpoint), traced)
    off = Tracing.off()
    try:
        for mode, runs in (("seq", 1), ("conc", a.runs)):
            workdir = a.workdir / f"telemetry-{mode}"
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir(parents=True)
            per_step: dict[str, list[float]] = {"bare": [], "metrics": [], "tracing": []}
            cpu_step: dict[str, list[float]] = {v: [] for v in per_step}
            for rep in range(a.warmup + a.reps):
                for variant in per_step:
                    chosen = tracing if variant == "tracing" else off
                    elapsed, cpu = asyncio.run(timed(workdir, runs, a.steps, variant, chosen))
                    if rep >= a.warmup:
                        us = elapsed / (runs * a.steps) * 1e6
                        cpu_us = cpu / (runs * a.steps) * 1e6
                        per_step[variant].append(us)
                        cpu_step[variant].append(cpu_us)
                        record = {"mode": mode, "variant": variant, "runs": runs,
                                  "steps": a.steps, "us_per_step": round(us, 1),
                                  "cpu_us_per_step": round(cpu_us, 1)}  # fmt: skip
                        print("RESULT " + json.dumps(record), flush=True)
            med = {v: statistics.median(x) for v, x in per_step.items()}
            print(f"SUMMARY mode={mode} us_per_step bare={med['bare']:.1f} "
                  f"metrics={med['metrics']:.1f} ({med['metrics'] / med['bare'] - 1:+.1%}) "
                  f"tracing={med['tracing']:.1f} ({med['tracing'] / med['metrics'] - 1:+.1%} over "
                  f"metrics; target ≤ +10% on conc)", flush=True)  # fmt: skip
            cm = {v: statistics.median(x) for v, x in cpu_step.items()}
            print(f"SUMMARY mode={mode} cpu_us_per_step (all threads) bare={cm['bare']:.1f} "
                  f"metrics={cm['metrics']:.1f} ({cm['metrics'] / cm['bare'] - 1:+.1%}) "
                  f"tracing={cm['tracing']:.1f} ({cm['tracing'] / cm['metrics'] - 1:+.1%} over "
                  f"metrics)", flush=True)  # fmt: skip
    finally:
        tracing.stop()
        print(f"SUMMARY spans dropped by the exporter: {traced.dropped_spans._value.get():.0f}")
        receiver.terminate()
        receiver.wait()


def metrics_bench(a: argparse.Namespace) -> None:
    workdir = a.workdir / "telemetry-metrics"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    db = workdir / "agentd.db"
    connect(db).close()

    async def fill_and_time() -> None:
        store = Store(db)
        await store.open()

        def fill(c: Conn) -> None:
            goals = [q.add_goal(c, title=f"goal {g}", why="bench", agent=f"agent{g % 5}",
                                criteria=[], deadline=None) for g in range(a.goals)]  # fmt: skip
            now = time.time()
            c.executemany(
                "INSERT INTO runs (goal_id, agent, status, trigger, wait, wait_kind, next_wake_at,"
                " created_at, updated_at) VALUES (?, ?, 'waiting', 'bench', 'timer', 'timer', ?, ?, ?)",
                [(goals[i % len(goals)], f"agent{i % 5}", now + 86400, now, now)
                 for i in range(a.waiting)],
            )  # fmt: skip
            c.executemany(
                "INSERT INTO inbox (kind, status, goal_id, title, created_at) VALUES"
                " ('approval', 'open', ?, 'approve it', ?)", [(g, now) for g in goals],
            )  # fmt: skip

        await store.write(fill)
        meter = Meter(Names(agents=[f"agent{n}" for n in range(5)]))
        reads, renders = [], []
        body = b""
        for _ in range(a.reps):
            t0 = time.perf_counter()
            figures = await store.read(lambda c: qm.home(c) if qm.exporter(c, "bench") else None)
            t1 = time.perf_counter()
            body = home.render(meter, figures)
            t2 = time.perf_counter()
            reads.append((t1 - t0) * 1000)
            renders.append((t2 - t1) * 1000)
        await store.close()
        print("RESULT " + json.dumps({"goals": a.goals, "waiting_runs": a.waiting,
              "read_ms": round(statistics.median(reads), 2),
              "render_ms": round(statistics.median(renders), 2), "bytes": len(body),
              "lines": body.count(b"\n")}), flush=True)  # fmt: skip
        print(f"SUMMARY /metrics with {a.goals} goals and {a.waiting} waiting runs: read "
              f"{statistics.median(reads):.1f} ms + render {statistics.median(renders):.1f} ms, "
              f"{len(body)} bytes")  # fmt: skip

    asyncio.run(fill_and_time())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("what", choices=["steps", "metrics"])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--goals", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=10000)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    (steps_bench if a.what == "steps" else metrics_bench)(a)


if __name__ == "__main__":
    main()
