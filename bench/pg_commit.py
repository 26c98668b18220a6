"""PostgreSQL commit baselines for issue 21's figures: what one durable commit costs on this machine.

    bench/pg_commit.py [--commits N] [--threads 1,4,8] [--batch 1,10,100] [--seconds S] [--reps R]
                       [--warmup-s W] [--workdir DIR]

On a throw-away cluster it starts itself (tests/pg_cluster.py: Debian's binaries, socket only, fsync,
synchronous_commit and full_page_writes on) under DIR/pg_commit/, each repetition measures:

- `raw_commit`: one connection, N single-row `INSERT … ; COMMIT` one after another — the fsync'd commit
  every journaled step must pay at least once (median/p99 µs per commit, commits/s);
- `group`: a naive group commit for each THREADS × BATCH cell: THREADS connections, each committing
  BATCH rows per transaction (`executemany`) as fast as it can for S seconds (rows/s, commits/s,
  median/p99 µs per commit). BATCH = 1 with several threads shows PostgreSQL's own flush sharing;
- `sqlite_raw_commit`: the same single-row commit on SQLite (WAL, synchronous=FULL) in DIR, the
  figure agentd's SQLite store is measured against today, on the same disk in the same run.

Prints RESULT lines (JSON) and one SUMMARY line of medians over the repetitions. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from tests.pg_cluster import Cluster, sweep_orphans

PAYLOAD = json.dumps({"kind": "act", "action": "noop", "result": {"ok": True, "note": "x" * 120}})
DDL = "CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id bigint, v text)"
INSERT = "INSERT INTO t (run_id, v) VALUES (%s, %s)"


def emit(record: dict[str, Any]) -> None:
    print("RESULT " + json.dumps(record), flush=True)


def stats_us(latencies_ns: list[int]) -> dict[str, float]:
    us = [n / 1000 for n in latencies_ns]
    p99 = statistics.quantiles(us, n=100)[98] if len(us) >= 100 else max(us)
    return {"median_us": round(statistics.median(us), 1), "p99_us": round(p99, 1)}


def raw_commit(url: str, commits: int) -> dict[str, Any]:
    """N single-row transactions on one connection, one after another."""
    latencies: list[int] = []
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        for _ in range(commits):
            t0 = time.perf_counter_ns()
            conn.execute(INSERT, (0, PAYLOAD))
            conn.commit()
            latencies.append(time.perf_counter_ns() - t0)
        elapsed = time.perf_counter() - start
    return {
        "mode": "raw_commit",
        "commits": commits,
        **stats_us(latencies),
        "commits_per_s": round(commits / elapsed),
    }


def group_commit(url: str, threads: int, batch: int, seconds: float) -> dict[str, Any]:
    """THREADS connections each committing BATCH rows per transaction until `seconds` pass."""
    ready = threading.Barrier(threads + 1)
    stop = threading.Event()
    latencies: list[list[int]] = [[] for _ in range(threads)]

    def worker(i: int) -> None:
        rows = [(i, PAYLOAD)] * batch
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            ready.wait()
            while not stop.is_set():
                t0 = time.perf_counter_ns()
                if batch == 1:
                    cur.execute(INSERT, rows[0])
                else:
                    cur.executemany(INSERT, rows)
                conn.commit()
                latencies[i].append(time.perf_counter_ns() - t0)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    stop.wait(seconds)  # a measuring window, not a wait for a condition
    stop.set()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - start
    commits = sum(len(lat) for lat in latencies)
    return {
        "mode": "group",
        "threads": threads,
        "batch": batch,
        "commits": commits,
        **stats_us([n for lat in latencies for n in lat]),
        "commits_per_s": round(commits / elapsed),
        "rows_per_s": round(commits * batch / elapsed),
    }


def sqlite_raw_commit(workdir: Path, commits: int) -> dict[str, Any]:
    """The same single-row commit on SQLite, WAL + synchronous=FULL, in the bench's own folder."""
    path = workdir / "raw.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, run_id INTEGER, v TEXT)")
    latencies: list[int] = []
    start = time.perf_counter()
    for _ in range(commits):
        t0 = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (run_id, v) VALUES (?, ?)", (0, PAYLOAD))
        conn.execute("COMMIT")
        latencies.append(time.perf_counter_ns() - t0)
    elapsed = time.perf_counter() - start
    conn.close()
    return {
        "mode": "sqlite_raw_commit",
        "commits": commits,
        **stats_us(latencies),
        "commits_per_s": round(commits / elapsed),
    }


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    best, kind = "", "unknown"
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount, fstype, *_ = line.split()
        if (str(path) + "/").startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


def environment(cluster: Cluster, url: str) -> dict[str, Any]:
    fs = filesystem(cluster.root)
    with psycopg.connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("fsync", "synchronous_commit", "wal_sync_method", "commit_delay")
        }
    return {
        "mode": "env",
        "server_version": version[0] if version else None,
        **settings,
        "filesystem": fs,
        "cores": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
    }


def parse_ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000, help="raw commits per repetition")
    parser.add_argument("--threads", type=parse_ints, default=[1, 4, 8])
    parser.add_argument("--batch", type=parse_ints, default=[1, 10, 100])
    parser.add_argument("--seconds", type=float, default=2.0, help="window per group cell")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--workdir", type=Path, default=Path(".bench"))
    args = parser.parse_args()

    workdir = args.workdir.resolve() / "pg_commit"
    if workdir.exists():
        sweep_orphans(workdir)  # a previous run killed before its teardown left its server running
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    workdir.chmod(0o755)  # as root the cluster's `postgres` account must reach its dir inside
    cluster = Cluster.start(parent=workdir, synced_init=True)
    try:
        url = cluster.create_database("bench")
        with psycopg.connect(url) as conn:
            conn.execute(DDL)
        env = environment(cluster, url)
        emit(env)
        if env["filesystem"] in ("tmpfs", "ramfs"):
            print(
                f"WARNING: {workdir} is on {env['filesystem']}: fsync is free there, so these "
                "figures flatter every engine; pass --workdir on a real disk",
                flush=True,
            )
        group_commit(url, max(args.threads), max(args.batch), args.warmup_s)  # warm-up, not printed
        raws: list[dict[str, Any]] = []
        sqlites: list[dict[str, Any]] = []
        cells: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for _ in range(args.reps):
            raws.append(raw_commit(url, args.commits))
            emit(raws[-1])
            sqlites.append(sqlite_raw_commit(workdir, args.commits))
            emit(sqlites[-1])
            for threads in args.threads:
                for batch in args.batch:
                    cell = group_commit(url, threads, batch, args.seconds)
                    emit(cell)
                    cells.setdefault((threads, batch), []).append(cell)
    finally:
        cluster.stop()

    def med(records: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in records)

    raw_rate = med(raws, "commits_per_s")
    grid = " ".join(
        f"t{t}b{b}={med(c, 'rows_per_s'):.0f}rows/s({med(c, 'rows_per_s') / raw_rate:.1f}x)"
        for (t, b), c in cells.items()
    )
    print(
        f"SUMMARY pg_raw_median_us={med(raws, 'median_us')} pg_raw_p99_us={med(raws, 'p99_us')} "
        f"pg_raw_commits_per_s={raw_rate:.0f} sqlite_raw_median_us={med(sqlites, 'median_us')} "
        f"sqlite_raw_commits_per_s={med(sqlites, 'commits_per_s'):.0f} group[threads,batch]: {grid} "
        f"(baselines for issue 21: journaled step <= 2x pg raw; concurrent steps/s >= 5x pg raw rate)",
        flush=True,
    )


if __name__ == "__main__":
    main()
