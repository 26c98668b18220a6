"""Memory and start-up with many waiting runs: a waiting run must be a row, not memory or compute.

    bench/memory.py --runs N --workdir DIR

Builds a home whose database holds N waiting runs — half asleep on a timer 30 days out, half
waiting on an open inbox question — each with its goal, a world snapshot and the journal a real run
leaves (start, observe, decide, check, act, wait), all written in ONE transaction with plain SQL
on agentd's migrated schema. Then starts a real daemon and reports: spawn → `daemon.ready`, RSS and
its high-water mark at ready and after ~3 s idle, the CPU the idle daemon used meanwhile, the time
SIGTERM takes, and restart → `daemon.ready` again. RESULT lines, then a SUMMARY line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db.store import SyncStore
from bench.inbox_latency import DaemonProcess, exit_on_sigterm, result

IDLE_S = 3.0
SLEEP_FOR_S = 30 * 86400  # timer runs wake in 30 days: never during the bench
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

CONFIG = """\
[daemon]
poll_interval_s = 0.1

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
description = "watches a service, asks the operator, sleeps between looks"
actions = ["notify", "ask", "sleep", "finish"]
"""
REPLIES = [{"reason": "idle", "action": {"kind": "sleep", "seconds": 3600}}]

INSERT_GOAL = (
    "INSERT INTO goals (goal_id, title, why, agent, status, criteria, deadline, created_at,"
    " updated_at) VALUES (?, ?, ?, 'default', 'active', ?, NULL, ?, ?)"
)
INSERT_RUN = (
    "INSERT INTO runs (run_id, goal_id, agent, status, trigger, wait, wait_kind,"
    " wait_item_id, next_wake_at, lease_epoch, created_at, updated_at)"
    " VALUES (?, ?, 'default', 'waiting', 'operator', ?, ?, ?, ?, 1, ?, ?)"
)
INSERT_STEP = (
    "INSERT INTO steps (run_id, seq, kind, status, action, args, digest, verdict, result, data,"
    " tokens_in, tokens_out, created_at, completed_at) VALUES (?,?,?,'done',?,?,?,?,?,?,?,?,?,?)"
)
INSERT_WORLD = (
    "INSERT INTO world (snapshot_id, agent, run_id, taken_at, data, changes)"
    " VALUES (?, 'default', ?, ?, ?, ?)"
)
INSERT_ITEM = (
    "INSERT INTO inbox (item_id, kind, status, goal_id, run_id, seq, title, body, data, created_at)"
    " VALUES (?, 'question', 'open', ?, ?, 5, ?, ?, '{}', ?)"
)


def j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def world(i: int) -> dict[str, Any]:
    """A typical snapshot: an HTTP health probe and the tail of a log."""
    return {
        "health": {"ok": True, "status": 200, "ms": 41.5, "body": '{"status":"ok","db":"up"}'},
        "log": {
            "lines": [
                f"2026-03-01T10:{m:02d}:00Z INFO checkout: served order {i}-{m}" for m in range(8)
            ]
        },
    }


def run_rows(i: int, now: float) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of waiting run `i` (goal, run, snapshot, journal, maybe a question)."""
    asks = i % 2 == 0
    question = f"Run {i}: checkout answers slowly since the deploy; roll back?"
    kind, args = ("ask", {"question": question}) if asks else ("sleep", {"seconds": SLEEP_FOR_S})
    reason = f"run {i}: " + ("the operator knows the deploy plan" if asks else "nothing changed")
    raw = j({"reason": reason, "action": {"kind": kind, **args}})
    digest = f"{i:064x}"
    wait = (
        {"kind": "inbox", "item_id": i, "why": "question"}
        if asks
        else {"kind": "timer", "why": "sleep", "until": now + SLEEP_FOR_S}
    )
    meta = {"raw": raw, "model": "scripted:replies.json", "stop_reason": "end", "decision_no": 1}
    steps = [
        (i, 1, "start", None, None, None, None, None, j({"trigger": "operator"}), 0, 0),
        (i, 2, "observe", None, None, None, None, None,
         j({"snapshot_id": i, "changes": {"health": "new", "log": "new"}, "events_seen": 0}), 0, 0),
        (i, 3, "decide", kind, j(args), digest, None, None, j({**meta, "reason": reason}), 900, 60),
        (i, 4, "check", kind, j(args), digest, "allow", None,
         j({"rule": "policy.default", "escalate": False}), 0, 0),
        (i, 5, "act", kind, j(args), digest, None, j({"ok": True, **({"item_id": i} if asks else {})}),
         j({"approval": None, "key": f"{i}:5"}), 0, 0),
        (i, 6, "wait", None, None, None, None, None, j(wait), 0, 0),
    ]  # fmt: skip
    return {
        "goals": [(i, f"keep checkout {i} healthy", "it is where revenue happens",
                   j(["p95 under 300 ms"]), now, now)],
        "runs": [(i, i, j(wait), wait["kind"], i if asks else None,
                  None if asks else now + SLEEP_FOR_S, now, now)],
        "world": [(i, i, now, j(world(i)), j({"health": "new", "log": "new"}))],
        "steps": [(*s, now, now) for s in steps],
        "inbox": [(i, i, i, question[:200], question, now)] if asks else [],
    }  # fmt: skip


def build_db(db: Path, runs: int) -> dict[str, Any]:
    """Migrate an empty database, then write every run's rows in ONE transaction."""
    started = time.monotonic()
    store = SyncStore(db)  # migrates
    now = time.time()
    rows: dict[str, list[tuple[Any, ...]]] = {
        k: [] for k in ("goals", "runs", "world", "steps", "inbox")
    }
    for i in range(1, runs + 1):
        for table, new in run_rows(i, now).items():
            rows[table] += new
    try:
        with store.transaction() as c:
            c.executemany(INSERT_GOAL, rows["goals"])
            c.executemany(INSERT_RUN, rows["runs"])
            c.executemany(INSERT_WORLD, rows["world"])
            c.executemany(INSERT_STEP, rows["steps"])
            c.executemany(INSERT_ITEM, rows["inbox"])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    return {
        "mode": "setup",
        "runs": runs,
        "steps": len(rows["steps"]),
        "open_questions": len(rows["inbox"]),
        "db_mb": round(db.stat().st_size / 2**20, 1),
        "setup_s": round(time.monotonic() - started, 2),
    }


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS, VmHWM (MB) and thread count from /proc/PID/status."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)  # kB → MB
        elif key == "Threads":
            fields["threads"] = int(value)
    return fields


def cpu_s(pid: int) -> float:
    """utime + stime of the process, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    after_name = stat[
        stat.rindex(")") + 2 :
    ].split()  # the name may hold spaces; field 3 starts here
    return (int(after_name[11]) + int(after_name[12])) / CLOCK_TICKS


def start_and_measure(daemon: DaemonProcess, label: str) -> dict[str, Any]:
    spawned = daemon.start()
    seen, ready = daemon.wait_ready(timeout_s=120)
    at_ready = proc_status(daemon.pid)
    cpu_before = cpu_s(daemon.pid)
    time.sleep(IDLE_S)
    daemon.alive()
    idle = proc_status(daemon.pid)
    idle_cpu = cpu_s(daemon.pid) - cpu_before
    return {
        "mode": label,
        "ready_s": round(seen - spawned, 3),
        "daemon_startup_ms": ready.get("startup_ms"),
        "waiting": ready.get("waiting"),
        "rss_mb_at_ready": at_ready["VmRSS"],
        "rss_mb_idle": idle["VmRSS"],
        "hwm_mb": idle["VmHWM"],
        "threads": idle["threads"],
        "idle_s": IDLE_S,
        "idle_cpu_ms": round(idle_cpu * 1000, 1),
        "idle_cpu_pct": round(idle_cpu / IDLE_S * 100, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    if a.runs < 2:
        ap.error("--runs must be at least 2 (half timer, half inbox)")
    exit_on_sigterm()
    workdir = a.workdir.resolve() / "memory"
    shutil.rmtree(workdir, ignore_errors=True)
    home = workdir / "home"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(CONFIG)
    (home / "replies.json").write_text(json.dumps(REPLIES))
    result(**build_db(home / "agentd.db", a.runs))

    with DaemonProcess(home, workdir / "daemon.log") as daemon:
        first = start_and_measure(daemon, "first_start")
        stop_s = daemon.stop()
        first["stop_s"] = None if stop_s is None else round(stop_s, 3)
        result(**first)
        again = start_and_measure(daemon, "restart")
        stop_s = daemon.stop()
        again["stop_s"] = None if stop_s is None else round(stop_s, 3)
        result(**again)
    if first["waiting"] != a.runs or again["waiting"] != a.runs:
        print(f"warning: the daemon reported {first['waiting']} waiting runs, not {a.runs}")
    rss = max(first["rss_mb_idle"], again["rss_mb_idle"])
    hwm = max(first["hwm_mb"], again["hwm_mb"])
    print(
        f"SUMMARY runs={a.runs} rss_mb={rss:.1f} hwm_mb={hwm:.1f} ready_s={first['ready_s']:.2f} "
        f"restart_ready_s={again['ready_s']:.2f} "
        f"idle_cpu_pct={max(first['idle_cpu_pct'], again['idle_cpu_pct']):.2f} "
        f"(targets: RSS < 150 MB, restart < 3 s, a waiting run costs no compute)",
        flush=True,
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the daemon was stopped on the way out
        sys.exit(130)
