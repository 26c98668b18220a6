"""One daemon, many goals (issue 35): what a home of N idle goals costs, for each N given.

    .venv/bin/python bench/scale.py --goals 1000,10000,100000 --idle-s 60 --day-s 60 --workdir .bench

For each N: `goal add --from` of N goals (wall and CPU); first start → `daemon.ready` and until
planning is done (the `outer_planning` meta row); the idle daemon's CPU over `--idle-s` and its RSS
(and high-water mark); `status --json`, `goal list --limit 50` and `inbox list` (CPU of the child
process, the median of 3); SIGTERM and restart → ready; the database's size; and a simulated day
(`serve --clock-speed`, `--day-s` wall seconds) in which `--timed` goals have a schedule every 4
hours: each fire's lateness on the simulated clock, against one tick (poll interval × speed).
The machine's 1-minute load is printed beside each figure. RESULT lines, then a SUMMARY.

`--store postgres` runs the same on a throw-away PostgreSQL cluster it starts under DIR and stops
at the end (tests/pg_cluster.py: fsync on, socket only): one database per N, and `--daemons`
(default 2) homes whose `[store] url` names it, each with its own `agentd serve`. Start, restart,
idle CPU and RSS are per daemon; the database's size is `pg_database_size`; the simulated day
counts a check-in fired twice (two daemons) as a duplicate: each must fire exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.inbox_latency import ROOT, DaemonProcess, agentd_argv, exit_on_sigterm, result

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
POLL_S = 0.1
FROM_LINES = 10_000
CONFIG = f"""\
[daemon]
poll_interval_s = {POLL_S}

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
model = "default"
min_s = 172800.0
every_s = 172800.0
max_s = 1209600.0
jitter_s = 0
"""
REPLIES = [{"reason": "idle", "next_look_in_s": None, "verdict": {"kind": "nothing"},
            "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}] * 50  # fmt: skip


def load() -> float:
    return round(os.getloadavg()[0], 2)


class Speedy(DaemonProcess):
    """A daemon started with extra `serve` options (the simulated clock)."""

    def __init__(self, home: Path, log_path: Path, extra: list[str]) -> None:
        super().__init__(home, log_path)
        self.extra = extra

    def start(self) -> float:
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
        self.events = []
        self.spawned_at = time.time()
        self.proc = subprocess.Popen(
            [*agentd_argv(), "--home", str(self.home), "serve", *self.extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, cwd=ROOT, env=env,
        )  # fmt: skip
        import threading

        self._reader = threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True)
        self._reader.start()
        return self.spawned_at


def cli(home: Path, *args: str) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, stdout) of one `agentd` command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run([*agentd_argv(), "--home", str(home), *args], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout  # fmt: skip
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, out


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


class Where:
    """Where the homes keep their state: SQLite files, or one PostgreSQL database per N."""

    def __init__(self, store: str, work: Path) -> None:
        self.cluster: Any = None
        if store == "postgres":
            from tests.pg_cluster import Cluster, missing_reason, sweep_orphans

            if (reason := missing_reason()) is not None:
                print(f"SKIPPED: {reason}", flush=True)
                sys.exit(0)
            sweep_orphans(work)
            work.chmod(0o755)  # as root the cluster's `postgres` account must reach its dir
            self.cluster = Cluster.start(parent=work, synced_init=True)

    def url(self, goals: int) -> str | None:
        return None if self.cluster is None else str(self.cluster.create_database(f"s{goals}"))

    def size_mb(self, home: Path, url: str | None) -> float:
        if url is None:
            return round(sum(p.stat().st_size for p in home.glob("agentd.db*")) / 2**20, 1)
        import psycopg

        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return round(int(row[0]) / 2**20, 1) if row else 0.0

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


def planning(home: Path) -> str:
    from agentd.db.store import SyncStore

    store = SyncStore(home / "agentd.db", migrate_schema=False, poke=False)
    try:
        sql = "SELECT value FROM meta WHERE key = 'outer_planning'"
        return str((store.read(lambda c: c.execute(sql).fetchone()) or [""])[0])
    finally:
        store.close()


def make_home(home: Path, url: str | None) -> Path:
    shutil.rmtree(home, ignore_errors=True)
    cli(home, "init")
    store = "" if url is None else f'[store]\nurl = "{url}"\n\n'
    (home / "config.toml").write_text(store + CONFIG)
    (home / "replies.json").write_text(json.dumps(REPLIES))
    return home


def build(home: Path, goals: int, url: str | None) -> None:
    make_home(home, url)
    wall = cpu = 0.0
    for first in range(0, goals, FROM_LINES):  # `goal add --from` takes 10,000 at once
        path = home / "goals.jsonl"
        with path.open("w") as f:
            for n in range(first, min(goals, first + FROM_LINES)):
                f.write(json.dumps({"title": f"goal {n}", "why": "scale bench",
                                    "agent": "default", "criteria": ["stays green"]}) + "\n")  # fmt: skip
        w, u, _ = cli(home, "goal", "add", "--from", str(path), "--json")
        wall, cpu = wall + w, cpu + u
    result(n=goals, what="goal_add", goals=goals, wall_s=round(wall, 2), cpu_s=round(cpu, 2),
           load=load())  # fmt: skip


def commands(home: Path, goals: int) -> dict[str, float]:
    out = {}
    for name, args in (("status", ["status", "--json"]),
                       ("goal_list_50", ["goal", "list", "--limit", "50"]),
                       ("inbox_list", ["inbox", "list"])):  # fmt: skip
        runs = [cli(home, *args) for _ in range(3)]
        cpu = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[0] for r in runs)
        result(n=goals, what=name, cpu_s=round(cpu, 3), wall_s=round(wall, 3), load=load())
        out[name] = cpu
    return out


def day(homes: list[Path], goals: int, timed: int, day_s: float, work: Path) -> dict[str, Any]:
    """A simulated day: `timed` goals get a schedule every 4 hours; their fires' lateness, and
    (several daemons) any fired twice."""
    from agentd.db import schedules as qs
    from agentd.db.store import SyncStore
    from agentd.outer import schedule

    speed = 86400.0 / day_s
    home = homes[0]
    store = SyncStore(home / "agentd.db")
    now = time.time()
    spec = schedule.parse_spec("interval", "14400", "UTC")

    def add(c: Any) -> None:
        for g in range(1, min(timed, goals) + 1):
            qs.add(c, g, kind="interval", spec="14400", tz="UTC", misfire=spec.misfire,
                   misfire_cap=spec.misfire_cap, max_lateness_s=spec.max_lateness_s, jitter_s=0,
                   now=now, next_fire_at=schedule.next_fire(spec, now, g, now))  # fmt: skip

    store.write(add)
    speedy = ["--clock-speed", f"{speed:g}"]
    daemons = start_all(homes, work, f"day-{goals}", speedy)
    try:
        time.sleep(day_s)
    finally:
        for d in daemons:
            d.stop()
    sql = "SELECT due_at, fired_at, status FROM checkins WHERE schedule_id IS NOT NULL"
    rows = store.read(lambda c: c.execute(sql).fetchall())
    twice = "SELECT count(*) - count(DISTINCT (schedule_id, due_at)) FROM checkins"
    if store.backend.dialect.sqlite:  # no row values in count(DISTINCT …) there
        twice = "SELECT count(*) - count(DISTINCT schedule_id || ':' || due_at) FROM checkins"
    dupes = int(
        store.read(lambda c: c.execute(twice + " WHERE schedule_id IS NOT NULL").fetchone()[0])
    )
    store.close()
    tick = POLL_S * speed
    late = sorted(max(0.0, f - d_) for d_, f, _ in rows)
    out = {"fires": len(rows), "missed": sum(1 for *_, s in rows if s == "missed"),
           "late_over_tick": sum(1 for x in late if x > tick), "tick_sim_s": tick,
           "fired_twice": dupes,
           "max_late_sim_s": round(late[-1], 1) if late else None,
           "p50_late_sim_s": round(late[len(late) // 2], 1) if late else None}  # fmt: skip
    result(n=goals, what="simulated_day", timed_goals=min(timed, goals), **out, load=load())
    return out


def start_all(
    homes: list[Path], work: Path, name: str, extra: list[str] | None = None
) -> list[DaemonProcess]:
    """Every home's daemon spawned at once, then each waited for; READY per daemon."""
    daemons: list[DaemonProcess] = []
    for i, home in enumerate(homes):
        d: DaemonProcess = Speedy(home, work / f"{name}-d{i}.log", extra or [])
        d.t0 = d.start()  # type: ignore[attr-defined]
        daemons.append(d)
    for d in daemons:
        seen, event = d.wait_ready(timeout_s=600)
        d.ready_s = seen - d.t0  # type: ignore[attr-defined]
        d.in_process_s = round(float(event.get("startup_ms", 0)) / 1000, 2)  # type: ignore[attr-defined]
    return daemons


def per(daemons: list[DaemonProcess], key: str) -> list[float]:
    return [round(getattr(d, key), 2) for d in daemons]


def one(goals: int, args: argparse.Namespace, work: Path, where: Where) -> dict[str, Any]:
    url = where.url(goals)
    home = work / f"home-{goals}"
    build(home, goals, url)
    homes = [home] + [make_home(work / f"home-{goals}-d{i}", url) for i in range(1, args.daemons)]
    daemons = start_all(homes, work, f"first-{goals}")
    try:
        t = time.monotonic()
        while not planning(home).endswith(" 1"):
            for d in daemons:
                d.alive()
            time.sleep(0.1)
        ready = max(per(daemons, "ready_s"))
        planned_s = ready + time.monotonic() - t
        result(n=goals, what="first_start", ready_s=per(daemons, "ready_s"),
               in_process_s=per(daemons, "in_process_s"),
               planned_all_s=round(planned_s, 2), load=load())  # fmt: skip
        time.sleep(2)  # the planning's own commits settle
        cpu0, t0 = [cpu_of(d.pid) for d in daemons], time.monotonic()
        time.sleep(args.idle_s)
        idle = [
            100 * (cpu_of(d.pid) - c) / (time.monotonic() - t0)
            for d, c in zip(daemons, cpu0, strict=True)
        ]
        mems = [memory(d.pid) for d in daemons]
        result(n=goals, what="idle", idle_s=args.idle_s, cpu_pct=[round(x, 3) for x in idle],
               rss_mb=[m["VmRSS"] for m in mems], rss_peak_mb=[m["VmHWM"] for m in mems],
               load=load())  # fmt: skip
        cmd = commands(home, goals)
    finally:
        for d in daemons:
            d.stop()
    daemons = start_all(homes, work, f"restart-{goals}")
    for d in daemons:
        d.stop()
    result(n=goals, what="restart", ready_s=per(daemons, "ready_s"),
           in_process_s=per(daemons, "in_process_s"), db_mb=where.size_mb(home, url),
           load=load())  # fmt: skip
    sim = day(homes, goals, args.timed, args.day_s, work) if args.day_s > 0 else {}
    return {
        "ready_s": ready,
        "restart_s": max(per(daemons, "ready_s")),
        "idle_pct": max(idle),
        **cmd,
        **sim,
    }  # the slowest daemon's


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--goals", default="1000,10000,100000")
    p.add_argument("--idle-s", type=float, default=60.0)
    p.add_argument("--day-s", type=float, default=60.0, help="wall seconds of the simulated day")
    p.add_argument("--timed", type=int, default=100, help="goals with a 4-hourly schedule")
    p.add_argument("--workdir", default=".bench")
    p.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite",
                   help="postgres: a throw-away cluster, one database per N")  # fmt: skip
    p.add_argument("--daemons", type=int, help="daemons per home's database (postgres: 2)")
    args = p.parse_args()
    args.daemons = args.daemons or (2 if args.store == "postgres" else 1)
    if args.store == "sqlite" and args.daemons != 1:
        p.error("--daemons: a SQLite home has one daemon; use --store postgres for several")
    exit_on_sigterm()
    work = Path(args.workdir).resolve() / ("scale" if args.store == "sqlite" else "scale-pg")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sizes = [int(n) for n in args.goals.split(",")]
    where = Where(args.store, work)
    try:
        figures = {n: one(n, args, work, where) for n in sizes}
    finally:
        where.stop()
    base, top = figures[sizes[0]], figures[sizes[-1]]
    ratio = {k: round(top[k] / base[k], 2) if base[k] else None
             for k in ("status", "goal_list_50", "inbox_list")}  # fmt: skip
    print(f"SUMMARY store={args.store} daemons={args.daemons} goals={sizes[-1]}"
          f" status_x={ratio['status']} goal_list_x={ratio['goal_list_50']}"
          f" inbox_list_x={ratio['inbox_list']} ready_s={top['ready_s']:.2f}"
          f" restart_s={top['restart_s']:.2f} idle_cpu_pct={top['idle_pct']:.3f}"
          f" late_over_tick={top.get('late_over_tick')} missed={top.get('missed')}"
          f" fired_twice={top.get('fired_twice')} load={load()} (target: ≤ 3x the first size's"
          " CPU, READY ≤ 3 s, idle < 0.5 % per daemon, none late, missed or fired twice)",
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
