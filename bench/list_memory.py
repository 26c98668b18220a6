"""What `goal list --json` costs at N goals (issue 35: --json streams): the child's peak RSS, its
CPU, the time to its first byte and to its last, and the bytes written — for this checkout's code,
and with `--before PATH` beside it the code of another checkout (e.g. a `git worktree` of main),
run by the same interpreter on the same home.

    .venv/bin/python bench/list_memory.py --goals 100000 --before /tmp/old-main

The goals are written straight into a fresh SQLite home (one transaction). The machine's 1-minute
load is printed beside each figure. RESULT lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.inbox_latency import ROOT, result
from bench.scale import CONFIG, load


def build(home: Path, goals: int) -> None:
    from agentd.db import queries as q
    from agentd.db.store import SyncStore

    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(CONFIG)
    store = SyncStore(home / "agentd.db")
    try:
        store.write(lambda c: [q.add_goal(c, title=f"goal {n}", why="list memory bench",
                                          agent="default", criteria=["stays green"],
                                          deadline=None) for n in range(goals)])  # fmt: skip
    finally:
        store.close()


# Runs `agentd` from the checkout named first: the venv's editable install of this checkout is
# left out of the import system, whichever checkout runs (the same start-up cost for both).
LAUNCH = """import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path.insert(0, sys.argv.pop(1))
sys.argv[0] = "agentd"
runpy.run_module("agentd", run_name="__main__", alter_sys=True)
"""


def measure(home: Path, code: Path, args: list[str]) -> dict[str, Any]:
    """One `agentd` command run from `code` (its package first on the path): peak RSS and CPU
    from the child's rusage, first and last byte on the monotonic clock."""
    argv = [sys.executable, "-c", LAUNCH, str(code), "--home", str(home), *args]
    t = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=ROOT)
    assert child.stdout is not None
    first = child.stdout.read(1)
    first_s = time.monotonic() - t
    size = len(first)
    tail = b""
    while piece := child.stdout.read(1 << 16):
        size += len(piece)
        tail = (tail + piece)[-200:]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, child.returncode
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "first_byte_s": round(first_s, 2),
            "wall_s": round(time.monotonic() - t, 2), "bytes": size, "load": load()}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--goals", default="100000", help="comma-separated goal counts")
    p.add_argument("--before", type=Path, help="another checkout whose code to run beside")
    p.add_argument("--workdir", type=Path, default=ROOT / ".bench" / "list_memory")
    args = p.parse_args()
    codes = [("this", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    for goals in (int(n) for n in args.goals.split(",")):
        home = args.workdir / f"home-{goals}"
        t = time.monotonic()
        build(home, goals)
        result(what="build", goals=goals, wall_s=round(time.monotonic() - t, 1), load=load())
        for command in (["goal", "list", "--json"], ["goal", "list", "--json", "--total"],
                        ["goal", "list", "--limit", "50", "--json"]):  # fmt: skip
            for name, code in codes:
                result(what=" ".join(command), code=name, goals=goals,
                       **measure(home, code, command))  # fmt: skip
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
