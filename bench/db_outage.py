"""Daemons on one PostgreSQL database through its restarts (issue 31): how soon each daemon commits again
once the database is back, and how many journal steps an outage costs at the concurrent load.

    bench/db_outage.py --daemons 2 --restarts 10 --down-s 1 --outage-s 5 --runs 40 --workdir DIR

under DIR/db-outage/ (wiped first):

A throw-away cluster (tests/pg_cluster.py, fsync on) and `--daemons` real `agentd serve`, each on
its own home naming the database, with a scripted model whose runs make many `notify` decisions
(four journal steps each, no process spawned), `--runs` runs shared out between them
(`max_concurrent_runs` = runs / daemons, given one daemon at a time): a steady load.

1. Recovery: `--restarts` times, the server is stopped (`pg_ctl stop -m fast`), kept down
   `--down-s`, started; the figure is the time from `pg_ctl start` returning (the database
   accepts connections) to the first step committed after it by each daemon (steps.created_at
   on the host's wall clock; whose step: the run's lease owner). Median and max per daemon.
2. Cost: the steps committed per second over 10 s of steady load, then one outage of
   `--outage-s`; steps lost = that rate × (the outage + 10 s after it) − the steps committed in
   that span.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from agentd.db.store import SyncStore
from bench.inbox_latency import create_runs
from bench.journal import emit, pg_database
from bench.multi_daemon import FINISH, start, stop, write_home


def first_steps_after(url: str, t0: float, owners: list[str], timeout_s: float) -> dict[str, float]:
    """Seconds from `t0` to each daemon's first step committed after it (by the run's owner)."""
    found: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(owners) and time.monotonic() < deadline:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT r.lease_owner, min(s.created_at) FROM steps s JOIN runs r"
                    " USING (run_id) WHERE s.created_at > %s AND r.lease_owner IS NOT NULL"
                    " GROUP BY r.lease_owner",
                    (t0,),
                ).fetchall()
        except psycopg.Error:
            rows = []
        for owner, at in rows:
            pid = str(owner).split(":")[1]
            if pid in owners and pid not in found:
                found[pid] = float(at) - t0
        time.sleep(0.02)
    return found


def owned(url: str, run_ids: list[int]) -> list[bool]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT lease_owner IS NOT NULL FROM runs WHERE run_id = ANY(%s)", (run_ids,)
        ).fetchall()
    return [bool(r[0]) for r in rows]


def steps(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM steps").fetchone()[0])  # type: ignore[index]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--daemons", type=int, default=2)
    p.add_argument("--restarts", type=int, default=10)
    p.add_argument("--down-s", type=float, default=1.0)
    p.add_argument("--outage-s", type=float, default=5.0)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = p.parse_args()
    a.workdir = a.workdir.resolve() / "db-outage"  # wiped first, as every bench does
    url, cluster = pg_database("pg", a.workdir, stats=False)
    replies: list[Any] = [
        {"action": {"kind": "notify", "message": f"step {i}"}} for i in range(10_000)
    ]
    replies.append(FINISH)
    share = -(-a.runs // a.daemons)  # each daemon drives its share: all of them commit steps
    homes = [
        write_home(a.workdir / f"d{i}", url, replies, max_runs=share, max_steps=50_000)
        for i in range(a.daemons)
    ]
    # One daemon at a time, each given its share of runs once the ones before are full: a
    # daemon adopts every unowned run it sees at once (bench/README.md, multi_daemon.py).
    daemons = []
    try:
        for home in homes:
            daemons += start([home])
            store = SyncStore(homes[0] / "agentd.db")
            run_ids = create_runs(store, share)
            while not all(owned(url, run_ids)):
                time.sleep(0.05)
            store.close()
        owners = [str(d.pid) for d in daemons]
        time.sleep(2.0)  # executing
        per: dict[str, list[float]] = {o: [] for o in owners}
        for _ in range(a.restarts):
            cluster.stop_server()
            time.sleep(a.down_s)
            cluster.start_server()
            t0 = time.time()
            got = first_steps_after(url, t0, owners, timeout_s=30.0)
            for o in owners:
                per[o].append(got.get(o, float("nan")))
            time.sleep(1.0)
        before, t_start = steps(url), time.monotonic()
        time.sleep(10.0)
        rate = (steps(url) - before) / (time.monotonic() - t_start)
        before = steps(url)
        t_stop = time.monotonic()
        cluster.stop_server()
        time.sleep(a.outage_s)
        cluster.start_server()
        time.sleep(10.0)
        span = time.monotonic() - t_stop
        done = steps(url) - before
    finally:
        stop(daemons)
        cluster.stop()
    print(f"{a.daemons} daemons, {a.runs} runs executing, {a.restarts} restarts of {a.down_s} s")
    for i, o in enumerate(owners):
        xs = [x for x in per[o] if x == x]
        med = statistics.median(xs) if xs else float("nan")
        print(
            f"  daemon {i}: database back → first committed step: median {med:.2f} s,"
            f" max {max(xs, default=float('nan')):.2f} s ({len(xs)}/{a.restarts} seen)"
        )
    lost = rate * span - done
    print(
        f"  steady load {rate:.0f} steps/s; a {a.outage_s:.0f} s outage cost {lost:.0f} steps"
        f" ({lost / rate if rate else float('nan'):.1f} s of work) over the {span:.1f} s from the stop"
    )
    medians = {o: statistics.median([x for x in v if x == x] or [0]) for o, v in per.items()}
    emit(
        {
            "bench": "db_outage",
            "daemons": a.daemons,
            "recovery_median_s": medians,
            "steps_per_s": round(rate, 1),
            "outage_s": a.outage_s,
            "steps_lost": round(lost),
        }
    )


if __name__ == "__main__":
    main()
