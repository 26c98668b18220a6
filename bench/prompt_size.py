"""Prompt size as a run's history grows: bytes of the decision prompt at decisions 10, 100, 1000.

    bench/prompt_size.py --decisions 1000 --workdir DIR

Drives the real daemon (in-process) with a scripted agent that notifies 1,000 times, then finishes;
the scripted provider's request log records each prompt's size. Older history is folded into
journaled summaries, so the 1,000-step prompt should be no more than 1.5× the 100-step one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd import config
from agentd.daemon import serve as daemon
from agentd.db import queries as q
from agentd.db.store import SyncStore

CONFIG = """
[daemon]
poll_interval_s = 0.05
log_level = "warning"

[models.default]
provider = "scripted"
replies = "replies.json"
request_log = "requests.log"

[sources.log]
type = "file_tail"
path = "service.log"
lines = 10

[agents.default]
sources = ["log"]
actions = ["notify", "finish"]

[agents.default.limits]
max_steps = 100000
history_steps = 30
"""


async def drive(home: Path, decisions: int) -> float:
    cfg = config.load(home / "config.toml")
    paths = config.Paths(home)
    store = SyncStore(paths.db)
    goal_id = store.write(
        lambda c: q.add_goal(
            c, title="tick", why="bench", agent="default", criteria=[], deadline=None
        )
    )
    run_id = store.write(
        lambda c: q.create_run(c, goal_id=goal_id, agent="default", trigger="bench")
    )
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(daemon.serve(paths, cfg, stop=stop))
    while not store.read(lambda c: q.get_run(c, run_id)).status.finished:
        await asyncio.sleep(0.2)
        if task.done():
            task.result()
    elapsed = time.perf_counter() - started
    stop.set()
    await task
    store.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--decisions", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    a = ap.parse_args()
    home = a.workdir / "prompt-size"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(CONFIG)
    (home / "service.log").write_text("".join(f"INFO request {i} ok\n" for i in range(50)))
    replies = [
        {"action": {"kind": "notify", "message": f"tick {i}"}} for i in range(1, a.decisions)
    ]
    replies.append({"action": {"kind": "finish", "outcome": "succeeded", "summary": "done"}})
    (home / "replies.json").write_text(json.dumps(replies))
    elapsed = asyncio.run(drive(home, a.decisions))
    sizes: dict[int, int] = {}
    summaries = 0
    for line in (home / "requests.log").read_text().splitlines():
        req = json.loads(line)
        if req["purpose"] == "decide":
            sizes[req["n"]] = req["prompt_bytes"]
        else:
            summaries += 1
    for n in (10, 100, 1000):
        if n in sizes:
            print("RESULT " + json.dumps({"decisions": n, "prompt_bytes": sizes[n]}))
    ratio = sizes.get(1000, 0) / sizes[100] if 100 in sizes else float("nan")
    print(
        f"SUMMARY prompt_bytes@10={sizes.get(10)} @100={sizes.get(100)} @1000={sizes.get(1000)} "
        f"ratio_1000_to_100={ratio:.2f} (target ≤ 1.5) summaries={summaries} "
        f"run_s={elapsed:.1f}"
    )


if __name__ == "__main__":
    main()
