"""Journal speed: agentd's durable step beside a raw SQLite WAL synchronous=FULL single-row commit.

    bench/journal.py seq  --steps N --reps R --warmup W --workdir DIR [--store URL|pg]
    bench/journal.py conc --runs K --steps M --reps R --warmup W --workdir DIR [--store URL|pg]

A step is one journaled action (an idempotent no-op returning a small dict), recorded through the same
store and query the engine uses for an idempotent action's result, durable before the same run's next
step starts. Each measured repetition prints one RESULT line; the raw-commit baseline is measured in
the same process and printed first, then a summary line with the ratios the issue targets.

`--store` measures the store on PostgreSQL instead: a postgresql:// URL of a throw-away database (the
bench migrates it, adds a goal and its runs per repetition and bench/pg_commit.py's table `t`), or
`pg` for a throw-away cluster of its own under DIR. The baselines are then bench/pg_commit.py's,
measured on the same database after each repetition: its raw single-row commit and, in conc mode,
its naive group commit (one connection, `executemany` of B rows per transaction).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import leases
from agentd.db import queries as q
from agentd.db.conn import Conn
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
    return await timed(Store(db), runs, steps)


async def timed(store: Store, runs: int, steps: int) -> float:
    """Seconds for `runs` runs to journal `steps` steps each through `store` (not opened yet)."""
    await store.open()  # daemon start-up (open + migrate) is not timed

    def setup(c: Conn) -> list[tuple[int, int]]:
        goal_id = q.add_goal(
            c, title="bench", why="bench", agent="bench", criteria=[], deadline=None
        )
        ids = [
            q.create_run(c, goal_id=goal_id, agent="bench", trigger="bench") for _ in range(runs)
        ]
        return [(r, leases.claim_run(c, r, "bench", 3600)) for r in ids]

    pairs = await store.write(setup)
    start = time.perf_counter()
    await asyncio.gather(*(one_run(store, r, e, steps) for r, e in pairs))
    elapsed = time.perf_counter() - start
    await store.close()
    BATCHES.append(store.writes / max(store.batches, 1))
    return elapsed


# ── PostgreSQL (--store) ──────────────────────────────────────────────────────────────────────────
# Each figure beside its own baselines, measured on the same database right after each repetition.
# psycopg, bench/pg_commit.py (the baselines) and tests/pg_cluster.py are imported in here only:
# without --store the bench imports, measures and prints what it always did.
#
# A mode is one function measuring one repetition (records, the figure last) and one summary.
# Several real daemons on one database and the NOTIFY wake-up are bench/multi_daemon.py's (real
# `agentd serve` processes, which this in-process bench does not start); it reuses pg_database,
# pg_env and emit from here.


def pg_database(store: str, workdir: Path, stats: bool) -> tuple[str, Any]:
    """The URL to measure and the throw-away cluster started for it (None for a given URL);
    `stats` loads pg_stat_statements into that cluster."""
    from tests.pg_cluster import Cluster, missing_reason, sweep_orphans

    if workdir.exists():
        sweep_orphans(workdir)  # a run killed before its teardown left its server running
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    if store != "pg":
        return store, None
    reason = missing_reason()
    if reason is not None:  # `make bench` goes on without PostgreSQL: this one says why not
        print(f"SKIPPED: {reason}", flush=True)
        sys.exit(0)
    workdir.chmod(0o755)  # as root the cluster's `postgres` account must reach its dir inside
    settings = None
    if stats:  # "all": the statements triggers run too (steps' rate_log trigger, foreign keys')
        settings = {
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all",
        }
    cluster = Cluster.start(settings, parent=workdir, synced_init=True)
    try:
        return cluster.create_database("bench"), cluster
    except BaseException:
        cluster.stop()
        raise


def pg_env(url: str, cluster: Any) -> dict[str, Any]:
    """Server version, durability settings, cores and load: pg_commit.py's env line."""
    import os

    import psycopg

    from bench import pg_commit

    if cluster is not None:
        return pg_commit.environment(cluster, url)
    with psycopg.connect(url) as conn:  # a server of its own: its disk is not ours to name
        version = conn.execute("SHOW server_version").fetchone()
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "wal_sync_method", "commit_delay")
        }
    return {
        "mode": "env", "server_version": version[0] if version else None, **settings,
        "filesystem": "unknown", "cores": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
    }  # fmt: skip


STATEMENTS = """
    SELECT toplevel, calls, rows, total_exec_time / calls * 1000, total_plan_time / calls * 1000,
           left(regexp_replace(query, '\\s+', ' ', 'g'), 100)
    FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls > 0
    ORDER BY total_exec_time DESC LIMIT 10"""


def pg_statements(url: str, reset: bool) -> list[dict[str, Any]]:
    """`--pg-stats`: the server's own time per statement since the last reset (pg_stat_statements,
    nested statements of triggers included): where a step's time goes inside PostgreSQL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if reset:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
            return []
        return [
            {
                "mode": "statement",
                "toplevel": top,
                "calls": calls,
                "rows": rows,
                "exec_us_per_call": round(exec_us, 1),
                "plan_us_per_call": round(plan_us, 1),
                "query": query,
            }
            for top, calls, rows, exec_us, plan_us, query in conn.execute(STATEMENTS)
        ]


def emit(record: dict[str, Any]) -> None:
    print("RESULT " + json.dumps({"store": "postgres", **record}), flush=True)


def pg_journal(a: argparse.Namespace, url: str, workdir: Path, runs: int) -> list[dict[str, Any]]:
    """One repetition of seq or conc on the daemon's Store over `url`, then its baselines:
    pg_commit.py's raw single-row commit and (conc) its naive group commit."""
    import os

    from agentd.db.postgres.backend import PostgresBackend
    from bench import pg_commit

    load = os.getloadavg()[0]
    store = Store(workdir / "agentd.db", backend=PostgresBackend(url, workdir))
    elapsed = asyncio.run(timed(store, runs, a.steps))
    records = [pg_commit.raw_commit(url, a.raw_commits)]
    records[0]["us_per_commit"] = round(1e6 / records[0]["commits_per_s"], 1)  # a mean, as below
    if a.mode == "conc":
        batch = a.group_batch or runs
        records.append(pg_commit.group_commit(url, a.group_threads, batch, a.group_seconds))
    total = runs * a.steps
    records.append({
        "mode": a.mode, "runs": runs, "steps_per_run": a.steps, "elapsed_s": round(elapsed, 4),
        "us_per_step": round(elapsed / total * 1e6, 1), "steps_per_s": round(total / elapsed, 1),
        "writes_per_commit": round(BATCHES[-1], 1), "loadavg_1m": load,
    })  # fmt: skip
    return records


def pg_journal_summary(a: argparse.Namespace, reps: list[list[dict[str, Any]]]) -> str:
    raw_us = [rep[0]["us_per_commit"] for rep in reps]
    per_step = [rep[-1]["us_per_step"] for rep in reps]
    ratios = [step / raw for step, raw in zip(per_step, raw_us, strict=True)]
    med, raw_med, ratio = (statistics.median(x) for x in (per_step, raw_us, ratios))
    head = (
        f"SUMMARY store=postgres mode={a.mode} median_us_per_step={med:.1f} "
        f"raw_us_per_commit={raw_med:.1f} writes_per_commit={statistics.median(BATCHES):.1f}"
    )
    if a.mode == "seq":
        verdict = "a raw PostgreSQL commit per step (median of paired ratios; target ≤ 2x)"
        return f"{head} → {ratio:.2f}x {verdict}"
    group = [rep[1] for rep in reps]
    rows = [g["rows_per_s"] for g in group]
    of_group = [rep[-1]["steps_per_s"] / g for rep, g in zip(reps, rows, strict=True)]
    cell = f"{group[0]['threads']}x{group[0]['batch']}"
    return (
        f"{head} group_rows_per_s[threads x rows/tx = {cell}]={statistics.median(rows):.0f} → "
        f"{1 / ratio:.1f}x the raw single-commit rate (target ≥ 5x), "
        f"{statistics.median(of_group):.2f}x the naive group commit's rows/s "
        "(medians of paired ratios)"
    )


Repetition = Callable[[argparse.Namespace, str, Path, int], list[dict[str, Any]]]
Summary = Callable[[argparse.Namespace, list[list[dict[str, Any]]]], str]
PG_MODES: dict[str, tuple[Repetition, Summary]] = {
    "seq": (pg_journal, pg_journal_summary),
    "conc": (pg_journal, pg_journal_summary),
}


def postgres(a: argparse.Namespace, runs: int, workdir: Path) -> None:
    """`--store`: the mode's repetitions on PostgreSQL, each followed by its own baselines."""
    import psycopg

    from bench import pg_commit

    repetition, summary = PG_MODES[a.mode]
    url, cluster = pg_database(a.store, workdir, a.pg_stats)
    try:
        with psycopg.connect(url) as conn:  # pg_commit's table (kept if a previous run made it)
            conn.execute(pg_commit.DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        env = pg_env(url, cluster)
        emit(env)
        if env["filesystem"] in ("tmpfs", "ramfs"):
            print(f"WARNING: the cluster is on {env['filesystem']}: fsync is free", flush=True)
        for _ in range(a.warmup):
            repetition(a, url, workdir, runs)
        BATCHES.clear()  # only measured repetitions count
        if a.pg_stats:
            pg_statements(url, reset=True)
        reps: list[list[dict[str, Any]]] = []
        for _ in range(a.reps):
            reps.append(repetition(a, url, workdir, runs))
            for record in reps[-1]:
                emit(record)
        for record in pg_statements(url, reset=False) if a.pg_stats else []:
            emit(record)
    finally:
        if cluster is not None:
            cluster.stop()
    print(summary(a, reps), flush=True)


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
    pg = ap.add_argument_group("PostgreSQL (--store)")
    pg.add_argument("--store", metavar="URL|pg", help="measure the store on PostgreSQL")
    pg.add_argument("--raw-commits", type=int, default=500, help="raw commits per baseline")
    pg.add_argument("--group-threads", type=int, default=1, help="naive group commit: threads")
    pg.add_argument("--group-batch", type=int, help="naive group commit: rows/tx (default --runs)")
    pg.add_argument("--group-seconds", type=float, default=1.0, help="naive group commit: window")
    pg.add_argument(
        "--pg-stats",
        action="store_true",
        help="print the server's time per statement (pg_stat_statements; --store pg only)",
    )
    a = ap.parse_args()
    runs = 1 if a.mode == "seq" else a.runs
    if a.store is not None:
        postgres(a, runs, a.workdir.resolve() / f"journal-pg-{a.mode}")
        return
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
