"""One daemon, many goals (issue 35): what a home of N idle goals costs, for each N given.

    .venv/bin/python bench/scale.py --goals 1000,10000,100000 --idle-s 60 --day-s 60 --workdir .bench

For each N: `goal add --from` of N goals (wall and CPU); first start → `daemon.ready` and until
planning is done (the `outer_planning` meta row); the idle daemon's CPU over `--idle-s` and its RSS
(and high-water mark); `status --json`, `goal list --limit 50` and `inbox list` (CPU of the child
process, the median of 3); SIGTERM and restart → ready; the database's size; and a simulated day
(`serve --clock-speed`, `--day-s` wall seconds) in which `--timed` goals have a schedule every 4
hours: each fire's lateness on the simulated clock, against one tick (poll interval × speed).
The machine's 1-minute load is printed beside each figure. RESULT lines, then a SUMMARY.
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


def planning(home: Path) -> str:
    from agentd.db.store import SyncStore

    store = SyncStore(home / "agentd.db", migrate_schema=False, poke=False)
    try:
        sql = "SELECT value FROM meta WHERE key = 'outer_planning'"
        return str((store.read(lambda c: c.execute(sql).fetchone()) or [""])[0])
    finally:
        store.close()


def build(home: Path, goals: int) -> None:
    shutil.rmtree(home, ignore_errors=True)
    cli(home, "init")
    (home / "config.toml").write_text(CONFIG)
    (home / "replies.json").write_text(json.dumps(REPLIES))
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


def start(home: Path, log: Path, extra: list[str] | None = None) -> tuple[DaemonProcess, float]:
    """A started daemon and seconds from spawn to `daemon.ready` (its own `startup_ms`, from
    after the interpreter and imports, is printed as `in_process_s`)."""
    d: DaemonProcess = Speedy(home, log, extra or [])
    t = d.start()
    seen, event = d.wait_ready(timeout_s=600)
    d.in_process_s = round(float(event.get("startup_ms", 0)) / 1000, 2)  # type: ignore[attr-defined]
    return d, seen - t


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


def day(home: Path, goals: int, timed: int, day_s: float, work: Path) -> dict[str, Any]:
    """A simulated day: `timed` goals get a schedule every 4 hours; their fires' lateness."""
    from agentd.db import schedules as qs
    from agentd.db.store import SyncStore
    from agentd.outer import schedule

    speed = 86400.0 / day_s
    store = SyncStore(home / "agentd.db")
    now = time.time()
    spec = schedule.parse_spec("interval", "14400", "UTC")

    def add(c: Any) -> None:
        for g in range(1, min(timed, goals) + 1):
            qs.add(c, g, kind="interval", spec="14400", tz="UTC", misfire=spec.misfire,
                   misfire_cap=spec.misfire_cap, max_lateness_s=spec.max_lateness_s, jitter_s=0,
                   now=now, next_fire_at=schedule.next_fire(spec, now, g, now))  # fmt: skip

    store.write(add)
    d, _ = start(home, work / f"day-{goals}.log", ["--clock-speed", f"{speed:g}"])
    try:
        time.sleep(day_s)
    finally:
        d.stop()
    sql = "SELECT due_at, fired_at, status FROM checkins WHERE schedule_id IS NOT NULL"
    rows = store.read(lambda c: c.execute(sql).fetchall())
    store.close()
    tick = POLL_S * speed
    late = sorted(max(0.0, f - d_) for d_, f, _ in rows)
    out = {"fires": len(rows), "missed": sum(1 for *_, s in rows if s == "missed"),
           "late_over_tick": sum(1 for x in late if x > tick), "tick_sim_s": tick,
           "max_late_sim_s": round(late[-1], 1) if late else None,
           "p50_late_sim_s": round(late[len(late) // 2], 1) if late else None}  # fmt: skip
    result(n=goals, what="simulated_day", timed_goals=min(timed, goals), **out, load=load())
    return out


def one(goals: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    home = work / f"home-{goals}"
    build(home, goals)
    d, ready_s = start(home, work / f"first-{goals}.log")
    try:
        t = time.monotonic()
        while not planning(home).endswith(" 1"):
            d.alive()
            time.sleep(0.1)
        planned_s = ready_s + time.monotonic() - t
        result(n=goals, what="first_start", ready_s=round(ready_s, 2),
               in_process_s=d.in_process_s,  # type: ignore[attr-defined]
               planned_all_s=round(planned_s, 2), load=load())  # fmt: skip
        time.sleep(2)  # the planning's own commits settle
        cpu0, t0 = cpu_of(d.pid), time.monotonic()
        time.sleep(args.idle_s)
        idle_pct = 100 * (cpu_of(d.pid) - cpu0) / (time.monotonic() - t0)
        mem = memory(d.pid)
        result(n=goals, what="idle", idle_s=args.idle_s, cpu_pct=round(idle_pct, 3),
               rss_mb=mem["VmRSS"], rss_peak_mb=mem["VmHWM"], load=load())  # fmt: skip
        cmd = commands(home, goals)
    finally:
        d.stop()
    d, restart_s = start(home, work / f"restart-{goals}.log")
    d.stop()
    size = sum(p.stat().st_size for p in home.glob("agentd.db*"))
    result(n=goals, what="restart", ready_s=round(restart_s, 2),
           in_process_s=d.in_process_s,  # type: ignore[attr-defined]
           db_mb=round(size / 2**20, 1), load=load())  # fmt: skip
    sim = day(home, goals, args.timed, args.day_s, work) if args.day_s > 0 else {}
    return {"ready_s": ready_s, "restart_s": restart_s, "idle_pct": idle_pct, **cmd, **sim}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--goals", default="1000,10000,100000")
    p.add_argument("--idle-s", type=float, default=60.0)
    p.add_argument("--day-s", type=float, default=60.0, help="wall seconds of the simulated day")
    p.add_argument("--timed", type=int, default=100, help="goals with a 4-hourly schedule")
    p.add_argument("--workdir", default=".bench")
    args = p.parse_args()
    exit_on_sigterm()
    work = Path(args.workdir).resolve() / "scale"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sizes = [int(n) for n in args.goals.split(",")]
    figures = {n: one(n, args, work) for n in sizes}
    base, top = figures[sizes[0]], figures[sizes[-1]]
    ratio = {k: round(top[k] / base[k], 2) if base[k] else None
             for k in ("status", "goal_list_50", "inbox_list")}  # fmt: skip
    print(f"SUMMARY goals={sizes[-1]} status_x={ratio['status']} goal_list_x={ratio['goal_list_50']}"
          f" inbox_list_x={ratio['inbox_list']} ready_s={top['ready_s']:.2f}"
          f" restart_s={top['restart_s']:.2f} idle_cpu_pct={top['idle_pct']:.3f}"
          f" late_over_tick={top.get('late_over_tick')} missed={top.get('missed')} load={load()}"
          " (target: ≤ 3x the first size's CPU, READY ≤ 3 s, idle < 0.5 %, none late or missed)",
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
