"""`agentd status` with many goals: the overview's one read transaction (runs, inbox, the next
check-ins as the planner plans them, failing check-ins) over a home of N active goals, each with
a cron schedule, an interval schedule, quiet hours, a planned look and a few journaled check-ins
(every fifth goal's last three failed).

    .venv/bin/python bench/status_goals.py --goals 200 --samples 20

Prints the median and the slowest of `operator.overview.at_a_glance` (ms) and of the whole
`agentd status --json` through the CLI in this process (ms).
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]

[agents.default.checkin]
quiet = "22:00-08:00"
tz = "UTC"
jitter_s = 600.0
"""


def build(root: Path, goals: int) -> Any:
    from agentd import config
    from agentd.db import checkins as qc
    from agentd.db import queries as q
    from agentd.operator import home as operator_home
    from agentd.operator import schedules as plan

    root.mkdir(parents=True, exist_ok=True)
    paths = config.Paths(root)
    paths.config.write_text(CONFIG)
    (root / "replies.json").write_text("[]")
    cfg = config.load(paths.config)
    store = operator_home.open_store(paths.db)
    now = time.time()
    for n in range(goals):
        goal_id = store.write(
            lambda c, n=n: q.add_goal(
                c, title=f"goal {n}", why="bench", agent="default", criteria=[], deadline=None
            )
        )
        store.write(lambda c, g=goal_id: qc.set_next(c, g, now + 3600 * (1 + g % 48), "look", now))
        plan.add_schedule(store, cfg, goal_id, plan.NewSchedule("cron", "0 9 * * mon-fri"))
        plan.add_schedule(store, cfg, goal_id, plan.NewSchedule("interval", "21600"))

        def journal(c: Any, g: int = goal_id) -> None:
            for k in range(6):
                cid = qc.add_due(c, g, now - 3600 * (6 - k), now - 3600 * (6 - k))
                assert cid is not None
                failed = g % 5 == 0 and k >= 3
                qc.advance(c, cid, "due", status="failed" if failed else "skipped",
                           reason="not valid JSON" if failed else "nothing moved",
                           completed_at=now - 3600 * (6 - k))  # fmt: skip

        store.write(journal)
    return paths, cfg, store


def timed(fn: Any, samples: int) -> tuple[float, float]:
    took = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        took.append((time.perf_counter() - t0) * 1000)
    return statistics.median(took), max(took)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--goals", type=int, default=200)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    from typer.testing import CliRunner

    from agentd.cli import app
    from agentd.operator import overview

    with tempfile.TemporaryDirectory() as tmp:
        paths, cfg, store = build(Path(tmp) / "home", args.goals)
        takes_cfg = "cfg" in inspect.signature(overview.at_a_glance).parameters
        kw = {"cfg": cfg} if takes_cfg else {}
        data = overview.at_a_glance(store, time.time(), **kw)
        med, worst = timed(lambda: overview.at_a_glance(store, time.time(), **kw), args.samples)
        print(f"RESULT overview goals={args.goals} median_ms={med:.1f} max_ms={worst:.1f}"
              f" next_checkins={len(data['next_checkins'])}"
              f" failing_goals={data.get('failing_goals')}")  # fmt: skip
        runner = CliRunner()

        def cli() -> None:
            result = runner.invoke(app, ["--home", str(paths.home), "status", "--json"])
            assert result.exit_code == 0, result.output

        med, worst = timed(cli, max(args.samples // 4, 3))
        print(f"RESULT cli_status_json goals={args.goals} median_ms={med:.1f} max_ms={worst:.1f}")
        store.close()


if __name__ == "__main__":
    main()
