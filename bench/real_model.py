"""agentd against a real model behind any OpenAI-compatible URL: the service-watch scenario (the
demo's checkout service, a bad deploy, `rollback` gated by approval), one check-in and one build,
then per decision the latency, prompt / completion tokens and cached share, the invalid replies,
the calls per run and each outcome.

    python bench/real_model.py --url http://127.0.0.1:8000/v1 --model smollm2 \\
        --context-tokens 2048 --timeout-s 300 --minutes 20

It approves the first rollback the model proposes (a model that never proposes one is reported
as such). Everything runs as real processes in a temporary home (kept with --keep).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentd import config
from agentd.db import accounting, checkins
from agentd.demo.ops import AGENT, Demo, demo_config
from agentd.models import InboxKind, StepKind, StepStatus
from agentd.operator import goals, inbox, runs
from agentd.operator.home import open_store


def model_block(a: argparse.Namespace) -> str:
    ctx = f"context_tokens = {a.context_tokens}\n" if a.context_tokens else ""
    return (
        f'[models.default]\nprovider = "openai"\nmodel = "{a.model}"\nbase_url = "{a.url}"\n'
        f'structured_output = "{a.structured_output}"\ntimeout_s = {a.timeout_s}\n'
        f"max_tokens = {a.max_tokens}\n{ctx}"
    )


def config_text(demo: Demo, port: int, a: argparse.Namespace) -> str:
    text = demo_config(demo.service_dir, port)
    start = text.index("[models.default]")
    end = text.index("[sources.health]")
    text = text[:start] + model_block(a) + "\n" + text[end:]
    return text + (
        f"\n[agents.{AGENT}.checkin]\nevery_s = 60.0\nmin_s = 30.0\nmax_s = 3600.0\n"
        'quiet = "none"\njitter_s = 0.0\nfirst_look = "ask"\n'
        f"\n[agents.{AGENT}.build]\nmax_revisions = 1\n"
    )


def cli(demo: Demo, *args: str, timeout_s: float = 60) -> str:
    argv = [sys.executable, "-m", "agentd", "--home", str(demo.home), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    return done.stdout + done.stderr


def scenario(demo: Demo, a: argparse.Namespace) -> dict[str, Any]:
    port = demo.start_service()
    demo.paths.config.write_text(config_text(demo, port, a))
    store = open_store(demo.paths.db)
    print(cli(demo, "doctor", "--ping", timeout_s=a.timeout_s + 30).strip(), flush=True)
    demo.start_daemon()
    goal_id = goals.add(
        store, title="Keep checkout healthy", why="Checkout is revenue; 5xx loses orders.",
        agent=AGENT, criteria=["/health returns 200"],
    ).goal_id  # fmt: skip
    time.sleep(2)
    demo.service("deploy", "v2-bad")
    deadline = time.monotonic() + a.minutes * 60
    approved: list[int | None] = [None]

    def approve() -> None:  # the first rollback proposed, whenever it comes
        for item in inbox.items(store):
            if (
                approved[0] is None
                and item.kind == InboxKind.APPROVAL
                and item.action == "rollback"
            ):
                inbox.approve(store, config.load(demo.paths.config), item.item_id)
                approved[0] = item.item_id
                print(f"approved item {item.item_id} (rollback)", flush=True)

    def settled() -> bool:
        return all(r.status.finished for r in runs.list_runs(store, goal_id=goal_id))

    while time.monotonic() < deadline and not (approved[0] is not None and settled()):
        approve()
        time.sleep(1)
    # `agentd build` starts a build run and returns: wait for it (and a check-in) to end.
    build = cli(demo, "build", str(goal_id), "a three-line incident note", "--json")
    checked = store.read(checkins.list_checkins)
    answered = len([r for r in checked if r.model])
    end = time.monotonic() + a.timeout_s * 4
    while time.monotonic() < end:
        approve()
        answers = len([r for r in store.read(checkins.list_checkins) if r.model])
        if settled() and answers > answered:
            break
        time.sleep(1)
    return {"goal_id": goal_id, "approved": approved[0], "build": build[-400:], "store": store}


def report(result: dict[str, Any]) -> None:
    store = result["store"]
    latencies: list[float] = []
    print("\nper decision: run  n  latency_s  tokens_in  tokens_out  cached  outcome")
    for run in sorted(runs.list_runs(store, goal_id=result["goal_id"]), key=lambda r: r.run_id):
        steps = runs.steps_of(store, run.run_id)
        calls = invalid = 0
        for prev, s in itertools.pairwise(steps):
            if s.kind not in (StepKind.DECIDE, StepKind.PLAN, StepKind.GENERATE, StepKind.JUDGE):
                continue
            calls += 1
            bad = s.status == StepStatus.ERROR
            invalid += bad
            took = (s.created_at - prev.created_at).total_seconds()
            latencies.append(took)
            cached = int(s.data.get("tokens_cached") or 0)
            share = f"{100 * cached / s.tokens_in:.0f}%" if s.tokens_in else "-"
            what = "invalid" if bad else f"{s.action or s.kind}"
            print(f"  {run.run_id:>3} {calls:>2} {took:>9.1f} {s.tokens_in:>10} {s.tokens_out:>11}"
                  f" {share:>7}  {what}")  # fmt: skip
        print(f"run {run.run_id} ({run.trigger}): {calls} calls, {invalid} invalid, "
              f"{run.status}: {(run.summary or '')[:120]}")  # fmt: skip
    if latencies:
        print(f"latency: median {statistics.median(latencies):.1f} s, max {max(latencies):.1f} s,"
              f" {len(latencies)} calls")  # fmt: skip
    for row in store.read(checkins.list_checkins):
        if row.model:
            print(f"check-in {row.checkin_id}: {row.status} by {row.model}, {row.tokens_in} in /"
                  f" {row.tokens_out} out: {(row.reason or '')[:100]}")  # fmt: skip
    print(
        f"approval: {'item ' + str(result['approved']) if result['approved'] else 'none proposed'}"
    )
    print(f"build: {result['build'].strip()[-300:]}")
    refused = [i for i in inbox.items(store, show_all=True) if i.rule == "model_refused"]
    print(f"model refusals in the inbox: {len(refused)}")
    for line in store.read(accounting.usage):
        print("usage:", json.dumps(line))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    p.add_argument("--model", default="local", help="the model name the server expects")
    p.add_argument("--structured-output", default="auto")
    p.add_argument("--context-tokens", type=int, default=None)
    p.add_argument("--timeout-s", type=float, default=300.0)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--minutes", type=float, default=20.0, help="time for the service-watch part")
    p.add_argument("--keep", action="store_true", help="keep the temporary home")
    a = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="agentd-real-model-"))
    demo = Demo(home, sys.stdout)
    started = time.monotonic()
    try:
        result = scenario(demo, a)
        report(result)
        result["store"].close()
    finally:
        demo.stop_all()
        print(
            f"home: {home}{'' if a.keep else ' (removed)'}; {time.monotonic() - started:.0f} s in all"
        )
        if not a.keep:
            import shutil

            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
