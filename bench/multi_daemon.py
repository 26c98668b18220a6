"""Several real `agentd serve` on one PostgreSQL database (issue 21): steps/s with 1, 2 and 4
daemons beside the raw commit rate, the notifying commits among them, and answer → wake-up latency
through NOTIFY and with LISTEN off.

    bench/multi_daemon.py multi  --daemons 1,2,4 --runs 400 --steps 5 --reps 3 --workdir DIR
                                 [--store URL|pg] [--notifier-rate R]
    bench/multi_daemon.py notify --samples 20 --scan-s 1 --workdir DIR [--store URL|pg]

Each daemon has its own home under DIR (config, socket, home lock) whose `[store] url` names the
one database, and a scripted model. `multi`: the daemons are started and ready, then the bench
adds `--runs` goals with a run each in one transaction (a CLI-style commit: it notifies) and waits
until every run has finished. A run makes `--steps` decisions of the builtin `notify` action (the
message differs each time, so the loop guard stays out of it) and then finishes: each decision is
four journal steps (observe, decide, check, act) with no process spawned. Each daemon may drive
--runs / N at once (`max_concurrent_runs`; `--max-runs` sets it); a daemon adopts at most 100
unowned runs per look whatever that limit, so fewer than 100 × N runs are not shared out.
Figures: journal steps/s
over the journal's own span (first START to last FINISH, the daemons' clock) and over the bench's
wall time from the commit to the last run seen finished; the server's transactions meanwhile —
`pg_notify` calls (pg_stat_statements), transactions that wrote (xids assigned), all commits
(pg_stat_database, reads included). Then the daemons stop and the baseline runs on the same
database: bench/pg_commit.py's raw single-row commit. `--notifier-rate R` adds a writer committing
R events/s as `agentd event` does (each commit notifies every daemon) from a home with no daemon.

`notify`: one daemon on home `served` leaves `--samples` runs waiting on a question; each is
answered through the CLI of home `remote`, which names the same database and has NO daemon, so
nothing pokes: only NOTIFY (LISTEN on) or the safety scan (`[store] listen = false`, `[api]
safety_scan_s = --scan-s`) can wake the run. Latency = the WAKE step's created_at (the daemon's
clock) − the item's resolved_at (the CLI's clock, stamped just before its commit): same host, same
wall clock. Each sample waits a random fraction of the scan interval first.

`--store pg` (default) starts a throw-away cluster with pg_stat_statements (as bench/journal.py
--pg-stats); a postgresql:// URL measures a server of yours (a throw-away database; the notify
count needs it to preload pg_stat_statements, else it prints null).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from agentd.db.store import SyncStore
from bench import pg_commit
from bench.inbox_latency import (
    ROOT,
    DaemonProcess,
    agentd_argv,
    create_runs,
    exit_on_sigterm,
    percentile,
)
from bench.journal import emit, pg_database, pg_env

CONFIG = """\
[store]
url = "{url}"
listen = {listen}

[api]
safety_scan_s = {scan_s}

[daemon]
max_concurrent_runs = {max_runs}

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]

[agents.default.limits]
max_steps = {max_steps}
max_notices_per_hour = {max_notices}
"""
FINISH = {"action": {"kind": "finish", "outcome": "succeeded", "summary": "done"}}


def write_home(home: Path, url: str, replies: list[Any], **settings: Any) -> Path:
    home.mkdir(parents=True)
    values = {"listen": "true", "scan_s": 60.0, "max_runs": 8, "max_steps": 50, "max_notices": 3,
              **settings}  # fmt: skip
    (home / "config.toml").write_text(CONFIG.format(url=url, **values))
    (home / "replies.json").write_text(json.dumps(replies))
    return home


def start(homes: list[Path]) -> list[DaemonProcess]:
    """One `agentd serve` per home, all spawned before any is waited on; every one ready."""
    daemons = [DaemonProcess(home, home / "daemon.log") for home in homes]
    for d in daemons:
        d.start()
    for d in daemons:
        d.wait_ready(120.0)
    return daemons


def stop(daemons: list[DaemonProcess]) -> None:
    for d in daemons:
        d.stop()


NOTIFY_CALLS = """
    SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
    WHERE query LIKE '%pg_notify%' AND query NOT LIKE '%pg_stat_statements%'
      AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"""


STATEMENT_CALLS = """
    SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
    WHERE toplevel AND query NOT LIKE '%pg_stat%' AND query NOT LIKE '%pg_snapshot%'
      AND query NOT LIKE 'SELECT count(*) FROM runs WHERE run_id = ANY%'
      AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"""


def counters(url: str) -> dict[str, int | None]:
    """The server's counters: pg_notify calls, top-level statements (the bench's own polls and
    counters aside), xids assigned (transactions that wrote, cluster-wide), commits of this
    database (pg_stat_database: every transaction, reads included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            notify = conn.execute(NOTIFY_CALLS).fetchone()
            notifies: int | None = int(notify[0]) if notify else None
            calls = conn.execute(STATEMENT_CALLS).fetchone()
            statements: int | None = int(calls[0]) if calls else None
        except psycopg.Error:
            notifies = statements = None  # no pg_stat_statements on this server
        with conn.transaction():  # its own snapshot: reading the xid horizon assigns none
            row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
            xmax = row.fetchone()
        with contextlib.suppress(psycopg.Error):  # this backend's own counts (PostgreSQL 15)
            conn.execute("SELECT pg_stat_force_next_flush()")
        commits = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return {
        "notifies": notifies,
        "statements": statements,
        "xids": int(xmax[0]) if xmax else None,
        "commits": int(commits[0]) if commits else None,
    }


def delta(before: dict[str, int | None], after: dict[str, int | None], key: str) -> int | None:
    a, b = after[key], before[key]
    return None if a is None or b is None else a - b


JOURNAL = """
    SELECT count(*), count(*) FILTER (WHERE kind = 'act'),
           max(created_at) - min(created_at),
           count(DISTINCT run_id) FILTER (WHERE kind = 'finish')
    FROM steps WHERE run_id = ANY(%s)"""


def finished(conn: psycopg.Connection[Any], run_ids: list[int]) -> int:
    """How many of the runs ended (on one connection: a new one per poll forks a server
    process, CPU the daemons would miss)."""
    row = conn.execute(
        "SELECT count(*) FROM runs WHERE run_id = ANY(%s)"
        " AND status IN ('succeeded', 'failed', 'cancelled')",
        (run_ids,),
    ).fetchone()
    return int(row[0]) if row else 0


def multi_rep(a: argparse.Namespace, url: str, workdir: Path, n: int, rep: int) -> list[Any]:
    """N daemons drive --runs runs of --steps notify decisions; then the raw-commit baseline."""
    replies: list[Any] = [
        {"action": {"kind": "notify", "message": f"step {i}"}} for i in range(a.steps)
    ]
    replies.append(FINISH)
    capacity = a.max_runs or math.ceil(a.runs / n)  # the same concurrency in all, by default
    homes = [
        write_home(workdir / f"r{rep}-n{n}-d{i}", url, replies, max_runs=capacity,
                   max_steps=a.steps + 5, max_notices=a.steps + 1, scan_s=a.multi_scan_s)
        for i in range(n)
    ]  # fmt: skip
    load = os.getloadavg()[0]
    daemons = start(homes)
    store = SyncStore(homes[0] / "agentd.db")
    stop_notifier = threading.Event()
    sent = [0]  # notifying commits made by --notifier-rate's writer
    notifier = threading.Thread(
        target=events, args=(a, url, workdir / f"r{rep}-n{n}-cli", stop_notifier, sent)
    )
    try:
        before = counters(url)
        cpu0 = [cpu_s(d.pid) for d in daemons]
        t0 = time.perf_counter()
        run_ids = create_runs(store, a.runs)  # one transaction, one NOTIFY: every daemon looks
        if a.notifier_rate > 0:
            notifier.start()
        deadline = time.monotonic() + a.timeout
        with psycopg.connect(url, autocommit=True) as poll:
            while finished(poll, run_ids) < len(run_ids):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} daemons: runs unfinished after {a.timeout} s")
                for d in daemons:
                    d.alive()
                time.sleep(0.02)
        wall = time.perf_counter() - t0
        cpu = sum(cpu_s(d.pid) for d in daemons) - sum(cpu0)
        stop_notifier.set()
        if notifier.is_alive():
            notifier.join()
        per_daemon = [len([1 for _, e in d.events if e.get("event") == "run.finished"])
                      for d in daemons]  # fmt: skip
    finally:
        store.close()
        stop(daemons)
    after = counters(url)  # the daemons' backends flushed their counts as they exited
    with psycopg.connect(url) as conn:
        row = conn.execute(JOURNAL, (run_ids,)).fetchone()
    assert row is not None
    steps, acts, span, done = int(row[0]), int(row[1]), float(row[2]), int(row[3])
    raw = pg_commit.raw_commit(url, a.raw_commits)
    notifies, statements = delta(before, after, "notifies"), delta(before, after, "statements")
    return [raw, {
        "mode": "multi", "daemons": n, "runs": a.runs, "decisions_per_run": a.steps,
        "steps": steps, "acts": acts, "runs_finished": done, "runs_per_daemon": per_daemon,
        "journal_span_s": round(span, 3), "wall_s": round(wall, 3),
        "steps_per_s": round(steps / span, 1), "steps_per_s_wall": round(steps / wall, 1),
        "acts_per_s": round(acts / span, 1), "daemon_cpu_ms_per_step": round(cpu * 1000 / steps, 2),
        "max_concurrent_runs": capacity, "notifier_commits": sent[0], "notify_calls": notifies,
        "notify_calls_per_s": None if notifies is None else round(notifies / wall, 2),
        "statements_per_step": None if statements is None else round(statements / steps, 2),
        "write_xacts": delta(before, after, "xids"), "commits": delta(before, after, "commits"),
        "commits_per_s": _rate(delta(before, after, "commits"), wall),
        "write_xacts_per_s": _rate(delta(before, after, "xids"), wall), "loadavg_1m": load,
    }]  # fmt: skip


def cpu_s(pid: int) -> float:
    """utime + stime of a process, all its threads (seconds, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def events(
    a: argparse.Namespace, url: str, home: Path, stop_at: threading.Event, sent: list[int]
) -> None:
    """`--notifier-rate`: events committed as `agentd event` commits them (each transaction
    notifies every daemon) at a steady rate from a home with no daemon, while the runs go on."""
    from agentd.db import items as qi

    store = SyncStore(write_home(home, url, [FINISH]) / "agentd.db")
    period, i = 1 / a.notifier_rate, 0
    next_at = time.monotonic()
    try:
        while not stop_at.wait(max(0.0, next_at - time.monotonic())):
            store.write(functools.partial(qi.add_event, name="bench.tick", data={"i": i},
                                          dedupe_key=None))  # fmt: skip
            i, next_at = i + 1, next_at + period
            sent[0] = i
    finally:
        store.close()


def _rate(count: int | None, seconds: float) -> float | None:
    return None if count is None else round(count / seconds, 1)


def multi(a: argparse.Namespace, url: str, workdir: Path) -> None:
    counts = [int(x) for x in a.daemons.split(",")]
    for w in range(a.warmup):
        multi_rep(a, url, workdir, counts[0], -1 - w)
    by_n: dict[int, list[tuple[dict[str, Any], dict[str, Any]]]] = {n: [] for n in counts}
    for rep in range(a.reps):
        for n in counts:
            raw, fig = multi_rep(a, url, workdir, n, rep)
            emit(raw)
            emit(fig)
            by_n[n].append((raw, fig))
    parts = []
    for n, pairs in by_n.items():
        ratio = statistics.median(f["steps_per_s"] / r["commits_per_s"] for r, f in pairs)
        parts.append(
            f"daemons={n}: steps_per_s={statistics.median(f['steps_per_s'] for _, f in pairs):.0f}"
            f" raw_commits_per_s={statistics.median(r['commits_per_s'] for r, _ in pairs):.0f}"
            f" → {ratio:.1f}x the raw rate;"
            f" statements_per_step={_med(pairs, 'statements_per_step')}"
            f" cpu_ms_per_step={_med(pairs, 'daemon_cpu_ms_per_step')}"
            f" notify_calls_per_s={_med(pairs, 'notify_calls_per_s')}"
            f" commits_per_s={_med(pairs, 'commits_per_s')}"
            f" write_xacts_per_s={_med(pairs, 'write_xacts_per_s')}"
        )
    print(
        "SUMMARY mode=multi " + " | ".join(parts) + f" (medians of {a.reps}; the ratio is the"
        " median of per-repetition pairs; target with 1 daemon ≥ 5x; on few cores more daemons"
        " show contention, not scale)",
        flush=True,
    )


def _med(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str) -> str:
    values = [f[key] for _, f in pairs if f[key] is not None]
    return f"{statistics.median(values):.2f}" if values else "null"


# ── notify: answer → wake-up with no daemon on the answering home ──────────────────────────


def wake_at(url: str, run_id: int, item_id: int) -> tuple[float, float] | None:
    """(the item's resolved_at, the run's WAKE step's created_at) once both exist, epoch s."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT i.resolved_at, min(s.created_at)"
            " FROM inbox i JOIN steps s ON s.run_id = i.run_id AND s.kind = 'wake'"
            " WHERE i.item_id = %s AND s.run_id = %s GROUP BY i.resolved_at",
            (item_id, run_id),
        ).fetchone()
    return None if row is None or row[0] is None else (float(row[0]), float(row[1]))


def questions_open(url: str, run_ids: list[int]) -> dict[int, int] | None:
    """run_id → its open question's item_id, once every run waits on one."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT r.run_id, i.item_id FROM runs r JOIN inbox i ON i.run_id = r.run_id"
            " WHERE r.run_id = ANY(%s) AND r.status = 'waiting' AND i.kind = 'question'"
            " AND i.status = 'open'",
            (run_ids,),
        ).fetchall()
    found = {int(r): int(i) for r, i in rows}
    return found if len(found) == len(run_ids) else None


def notify_phase(a: argparse.Namespace, url: str, workdir: Path, listen: bool) -> dict[str, Any]:
    mode = "notify_listen" if listen else "notify_scan"
    scan_s = 60.0 if listen else a.scan_s
    replies = [{"action": {"kind": "ask", "question": "Which region?"}}, FINISH]
    served = write_home(workdir / f"{mode}-served", url, replies, listen=str(listen).lower(),
                        scan_s=scan_s, max_runs=a.samples)  # fmt: skip
    remote = write_home(workdir / f"{mode}-remote", url, replies, scan_s=scan_s)
    (daemon,) = start([served])
    store = SyncStore(served / "agentd.db")
    figures: list[float] = []
    try:
        run_ids = create_runs(store, a.samples)
        items = daemon.wait_for(lambda: questions_open(url, run_ids), "questions", 60.0)
        for i, run_id in enumerate(run_ids):
            time.sleep(random.uniform(0, a.scan_s))  # a random phase against the scan
            started = time.time()
            done = subprocess.run(
                [*agentd_argv(), "--home", str(remote), "inbox", "answer",
                 str(items[run_id]), "eu-west"],
                capture_output=True, text=True, cwd=ROOT, check=False,
            )  # fmt: skip
            cli_ms = (time.time() - started) * 1000
            if done.returncode != 0:
                raise RuntimeError(f"agentd inbox answer failed: {done.stderr.strip()}")
            probe = functools.partial(wake_at, url, run_id, items[run_id])
            resolved, wake = daemon.wait_for(probe, f"run {run_id} woken", scan_s + 30)
            figures.append((wake - resolved) * 1000)
            emit({"mode": mode, "sample": i, "commit_to_wake_ms": round(figures[-1], 1),
                  "cli_ms": round(cli_ms, 1), "run_id": run_id,
                  "item_id": items[run_id]})  # fmt: skip
        woken = len([1 for _, e in daemon.events if e.get("event") == "run.woken"])
    finally:
        store.close()
        daemon.stop()
    return {
        "mode": f"{mode}_summary", "listen": listen, "safety_scan_s": scan_s,
        "samples": len(figures), "median_ms": round(statistics.median(figures), 1),
        "p90_ms": round(percentile(figures, 90), 1), "max_ms": round(max(figures), 1),
        "min_ms": round(min(figures), 1), "woken_logged": woken,
        "loadavg_1m": os.getloadavg()[0],
    }  # fmt: skip


def notify(a: argparse.Namespace, url: str, workdir: Path) -> None:
    summaries = [notify_phase(a, url, workdir, listen) for listen in (True, False)]
    for s in summaries:
        emit(s)
    on, off = summaries
    print(
        f"SUMMARY mode=notify listen_on: median_ms={on['median_ms']} p90_ms={on['p90_ms']} "
        f"max_ms={on['max_ms']} | listen_off (safety scan {off['safety_scan_s']} s): "
        f"median_ms={off['median_ms']} p90_ms={off['p90_ms']} max_ms={off['max_ms']} "
        "(answer's commit → the WAKE step, the answer from a home with no daemon; p90 "
        f"nearest-rank over {on['samples']} samples)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("mode", choices=["multi", "notify"])
    ap.add_argument("--store", metavar="URL|pg", default="pg")
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    ap.add_argument("--daemons", default="1,2,4", help="multi: daemon counts, comma-separated")
    ap.add_argument("--runs", type=int, default=400, help="multi: runs at once")
    ap.add_argument("--steps", type=int, default=5, help="multi: notify decisions per run")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="multi: unmeasured repetitions")
    ap.add_argument("--raw-commits", type=int, default=500, help="raw commits per baseline")
    ap.add_argument("--max-runs", type=int, help="multi: per daemon (default: runs / daemons)")
    ap.add_argument("--notifier-rate", type=float, default=0.0, help="multi: events/s alongside")
    ap.add_argument("--multi-scan-s", type=float, default=60.0, help="multi: [api] safety_scan_s")
    ap.add_argument("--timeout", type=float, default=300.0, help="multi: seconds for all runs")
    ap.add_argument("--samples", type=int, default=20, help="notify: answers per phase")
    ap.add_argument("--scan-s", type=float, default=1.0, help="notify: safety scan, LISTEN off")
    a = ap.parse_args()
    exit_on_sigterm()
    workdir = a.workdir.resolve() / f"multi-daemon-{a.mode}"
    url, cluster = pg_database(a.store, workdir, stats=True)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(pg_commit.DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
            with contextlib.suppress(psycopg.Error):  # without it the notify count is null
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        env = pg_env(url, cluster)
        emit(env)
        if env["filesystem"] in ("tmpfs", "ramfs"):
            print(f"WARNING: the cluster is on {env['filesystem']}: fsync is free", flush=True)
        (multi if a.mode == "multi" else notify)(a, url, workdir)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
