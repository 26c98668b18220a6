"""Why the daemon's writer is its own group-committing thread and not aiosqlite: the same workload
as `bench/journal.py conc` (K runs × M journaled steps at once, each durable before the run's next
step), through agentd's Store and through aiosqlite, in one process, alternating repetitions.

    .venv/bin/pip install aiosqlite   # a one-off: agentd itself never imports it
    bench/journal_aiosqlite.py --runs 100 --steps 10 --reps 3 --workdir DIR

aiosqlite runs each connection on its own thread and commits what each caller asks, one by one:
    shared   one connection, an asyncio.Lock per transaction (tasks sharing a connection would
             interleave their transactions otherwise): BEGIN IMMEDIATE, INSERT, COMMIT — 3 awaits
    per-run  a connection (and thread) per run: no lock, but concurrent writers queue on SQLite's
             write lock (busy_timeout) and every step is still its own fsync
Prints one RESULT line per measurement and a SUMMARY with medians.
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

import aiosqlite

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import leases
from agentd.db import queries as q
from agentd.db.sqlite.connection import BUSY_TIMEOUT_MS
from agentd.db.store import Store, SyncStore
from agentd.models import StepKind


def fresh(workdir: Path, runs: int) -> tuple[Path, list[tuple[int, int]]]:
    """A migrated database with `runs` claimed runs (not timed)."""
    for p in workdir.glob("agentd.db*"):
        p.unlink()
    db = workdir / "agentd.db"
    store = SyncStore(db)

    def setup(c: Any) -> list[tuple[int, int]]:
        goal_id = q.add_goal(c, title="b", why="b", agent="b", criteria=[], deadline=None)
        ids = [q.create_run(c, goal_id=goal_id, agent="b", trigger="b") for _ in range(runs)]
        return [(r, leases.claim_run(c, r, "bench", 3600)) for r in ids]

    pairs = store.write(setup)
    store.close()
    return db, pairs


def row(run_id: int, epoch: int, i: int) -> Any:
    return q.step_insert(
        run_id, epoch, StepKind.ACT, i + 2, action="noop", args={}, result={"ok": True, "i": i}
    )[1]


async def agentd_store(db: Path, pairs: list[tuple[int, int]], steps: int) -> float:
    store = Store(db)
    await store.open()

    async def one(run_id: int, epoch: int) -> None:
        for i in range(steps):
            await store.insert(row(run_id, epoch, i))

    start = time.perf_counter()
    await asyncio.gather(*(one(r, e) for r, e in pairs))
    elapsed = time.perf_counter() - start
    await store.close()
    return elapsed


async def _open(db: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(db, isolation_level=None)
    await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    await conn.execute("PRAGMA journal_mode = WAL")
    await conn.execute("PRAGMA synchronous = FULL")
    return conn


async def _step(conn: aiosqlite.Connection, ins: Any) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    await conn.execute(ins.sql, ins.params)
    await conn.execute("COMMIT")


async def aiosqlite_shared(db: Path, pairs: list[tuple[int, int]], steps: int) -> float:
    conn = await _open(db)
    lock = asyncio.Lock()

    async def one(run_id: int, epoch: int) -> None:
        for i in range(steps):
            ins = row(run_id, epoch, i)
            async with lock:
                await _step(conn, ins)

    start = time.perf_counter()
    await asyncio.gather(*(one(r, e) for r, e in pairs))
    elapsed = time.perf_counter() - start
    await conn.close()
    return elapsed


LOCKED: list[int] = []  # per-run: steps that failed with "database is locked", per repetition


async def aiosqlite_per_run(db: Path, pairs: list[tuple[int, int]], steps: int) -> float:
    conns = [await _open(db) for _ in pairs]
    LOCKED.append(0)

    async def one(conn: aiosqlite.Connection, run_id: int, epoch: int) -> None:
        for i in range(steps):
            try:
                await _step(conn, row(run_id, epoch, i))
            except sqlite3.OperationalError:  # busy_timeout ran out: the step is not journaled
                LOCKED[-1] += 1
                if conn.in_transaction:
                    await conn.execute("ROLLBACK")

    start = time.perf_counter()
    await asyncio.gather(*(one(c, r, e) for c, (r, e) in zip(conns, pairs, strict=True)))
    elapsed = time.perf_counter() - start
    for conn in conns:
        await conn.close()
    return elapsed


WAYS = {"agentd": agentd_store, "aiosqlite_shared": aiosqlite_shared}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--per-run", action="store_true", help="Also a connection per run (slow).")
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    workdir = a.workdir / "journal-aiosqlite"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    ways = {**WAYS, "aiosqlite_per_run": aiosqlite_per_run} if a.per_run else WAYS
    total = a.runs * a.steps
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for rep in range(a.reps + 1):  # the first repetition warms up and is not counted
        for name, way in ways.items():
            db, pairs = fresh(workdir, a.runs)
            elapsed = asyncio.run(way(db, pairs, a.steps))
            if rep:
                rates[name].append(total / elapsed)
                print("RESULT " + json.dumps({"way": name, "runs": a.runs, "steps": a.steps,
                      "steps_per_s": round(total / elapsed, 1)}), flush=True)  # fmt: skip
    if LOCKED:
        print(f"LOCKED per_run steps failing with 'database is locked' per repetition: {LOCKED}")
    med = {name: statistics.median(r) for name, r in rates.items()}
    parts = " ".join(f"{name}={rate:.0f}/s" for name, rate in med.items())
    print(f"SUMMARY runs={a.runs} steps={a.steps} median steps_per_s: {parts} → agentd is "
          f"{med['agentd'] / med['aiosqlite_shared']:.1f}x aiosqlite (shared connection)")  # fmt: skip


if __name__ == "__main__":
    main()
