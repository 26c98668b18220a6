"""Journal speed: agentd's durable step beside a raw SQLite WAL synchronous=FULL single-row commit.

    bench/journal.py seq  --steps N --reps R --warmup W --workdir DIR
    bench/journal.py conc --runs K --steps M --reps R --warmup W --workdir DIR

A step is one journaled action (an idempotent no-op returning a small dict), recorded through the same
store and query the engine uses for an idempotent action's result, durable before the same run's next
step starts. Each measured repetition prints one RESULT line; the raw-commit baseline is measured in
the same process and printed first, then a summary line with the ratios the issue targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import queries as q
from agentd.db import waits as qw
from agentd.db.sqlite.connection import connect
from agentd.db.store import Store
from agentd.models import StepKind


def raw_commit_us(workdir: Path, n: int = 500) -> float:
    """µs per single-row commit with plain sqlite3, WAL, synchronous=FULL."""
    path = workdir / "raw.db"
    for p in workdir.glob("raw.db*"):
        p.unlink()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed / n * 1e6


BATCHES: list[float] = []  # mean writes per commit, per measured repetition


async def noop(i: int) -> dict[str, Any]:
    return {"ok": True, "i": i}


async def one_run(store: Store, run_id: int, epoch: int, steps: int) -> None:
    # As the engine journals an idempotent action: execute, then one durable write of the
    # result, at the seq the run's in-memory journal says is next (START is seq 1).
    for i in range(steps):
        result = await noop(i)
        _step, row = q.step_insert(
            run_id, epoch, StepKind.ACT, i + 2, action="noop", args={}, result=result
        )
        await store.insert(row)


async def measure(workdir: Path, runs: int, steps: int) -> float:
    db = workdir / "agentd.db"
    for p in workdir.glob("agentd.db*"):
        p.unlink()
    conn = connect(db)
    conn.close()
    store = Store(db)
    await store.open()  # daemon start-up (open + migrate) is not timed

    def setup(c: sqlite3.Connection) -> list[tuple[int, int]]:
        goal_id = q.add_goal(
            c, title="bench", why="bench", agent="bench", criteria=[], deadline=None
        )
        ids = [
            q.create_run(c, goal_id=goal_id, agent="bench", trigger="bench") for _ in range(runs)
        ]
        return [(r, qw.claim_run(c, r, "bench", 3600)) for r in ids]

    pairs = await store.write(setup)
    start = time.perf_counter()
    await asyncio.gather(*(one_run(store, r, e, steps) for r, e in pairs))
    elapsed = time.perf_counter() - start
    await store.close()
    BATCHES.append(store.writes / max(store.batches, 1))
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("mode", choices=["seq", "conc"])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    runs = 1 if a.mode == "seq" else a.runs
    workdir = a.workdir / f"journal-{a.mode}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)

    for _ in range(a.warmup):
        raw_commit_us(workdir)
        asyncio.run(measure(workdir, runs, a.steps))
    BATCHES.clear()  # only measured repetitions count
    raws: list[float] = []
    per_step: list[float] = []
    for _ in range(a.reps):
        # The baseline is re-measured right after each repetition: fsync latency drifts on a
        # shared disk, and a ratio of two measurements minutes apart would measure the drift.
        # (After, not before: closing the raw database checkpoints it, and the device would
        # still be flushing that while the repetition runs.)
        elapsed = asyncio.run(measure(workdir, runs, a.steps))
        raw_us = raw_commit_us(workdir)
        raws.append(raw_us)
        print("RESULT " + json.dumps({"mode": "raw_commit", "us_per_commit": round(raw_us, 1),
                                      "commits_per_s": round(1e6 / raw_us, 1)}), flush=True)  # fmt: skip
        total = runs * a.steps
        per_step.append(elapsed / total * 1e6)
        print("RESULT " + json.dumps({
            "mode": a.mode, "runs": runs, "steps_per_run": a.steps, "elapsed_s": round(elapsed, 4),
            "us_per_step": round(elapsed / total * 1e6, 1), "steps_per_s": round(total / elapsed, 1),
        }), flush=True)  # fmt: skip
    ratios = [step / raw for step, raw in zip(per_step, raws, strict=True)]
    med, raw_med, ratio = (statistics.median(x) for x in (per_step, raws, ratios))
    if a.mode == "seq":
        verdict = f"{ratio:.2f}x a raw commit per step (median of paired ratios; target ≤ 2x)"
    else:
        verdict = (
            f"{1 / ratio:.1f}x the raw single-commit rate (median of paired ratios; target ≥ 5x)"
        )
    print(
        f"SUMMARY mode={a.mode} median_us_per_step={med:.1f} raw_us_per_commit={raw_med:.1f} "
        f"writes_per_commit={statistics.median(BATCHES):.1f} → {verdict}"
    )


if __name__ == "__main__":
    main()
