"""The inner loop: what a batch of build runs costs and how it ends — drafts per artifact, model
calls, tokens, passed vs escalated — and whether the revise prompt stays bounded as revisions pile up.

    bench/inner_loop.py --runs 50 --batches 3 --seed 1 --workdir DIR

Each batch is a fresh home and one in-process daemon. Every run gets its own agent and scripted
model (its own replies file and request log), so each run behaves differently: its scenario is drawn
from a seeded distribution — the judge passes the first draft, or after 1–3 revisions, or after 5
(an agent with `max_revisions = 6`, so a 5th revision's prompt is measured: one such run is forced
into every batch that drew none), or never (the failures move around until the bound), or "stuck"
(the same failure twice), or a requirement needs information, or a deterministic check fails a
draft the judge passed, or the plan asks a clarifying question first (answered by the bench at
once) and then never passes. Drafts are 1–3 KB of Markdown growing ~5 % per revision, from 1 KB of
material. Escalated runs are left waiting on their question. Every figure is read back from the
database (artifacts, steps, runs, inbox) and the request logs; each scenario's expected ending and
number of drafts only flag the runs that went otherwise (`unexpected_endings`). Prints one
`RESULT {json}` per batch, a per-scenario table on stderr, and a SUMMARY line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd import config, log  # after the path fix, like every bench script
from agentd.daemon import serve as daemon
from agentd.db import artifacts as qa
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.inner import spec as build_spec
from agentd.models import InboxKind, RunStatus, StepKind
from agentd.operator import inbox

REQUIRE = ("names the role's stack (Go, Postgres)", "one page", "quantified results")
SECTION = "Summary"  # the deterministic check: every run's agent requires this heading
WORDS = ("migrated", "latency", "Postgres", "on-call", "Go", "service", "reduced", "p99", "team",
         "designed", "billing", "queue", "throughput", "incident", "owned", "shipped")  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A judge script: the requirement ids failing on each version (the last one repeats)."""

    weight: float
    failing: tuple[tuple[str, ...], ...]
    ends: str  # what should happen: "passed" or "escalated:<why>" …
    versions: int  # … after this many drafts (1 + revisions)
    max_revisions: int = 3
    needs_info: str | None = None  # a requirement the judge says needs information
    no_section_until: int = 0  # drafts before this version lack the checked heading
    cycle: bool = False  # the failing sets cycle instead of the last one repeating
    clarify: bool = False  # the plan asks a question first; the bench answers it

    def failing_at(self, version: int) -> tuple[str, ...]:
        if self.cycle:
            return self.failing[(version - 1) % len(self.failing)]
        return self.failing[min(version, len(self.failing)) - 1]


P = ()
FIVE = (("R1", "R2", "R3"), ("R2", "R3"), ("R3",), ("R4",), ("R1",), P)
SWAP = (("R1",), ("R2",))  # each revision fixes one thing and breaks another: never a pass
BOUND = "escalated:build_bound"
SCENARIOS: dict[str, Scenario] = {
    "pass_0": Scenario(0.22, (P,), "passed", 1),
    "pass_1": Scenario(0.18, (("R1", "R2"), P), "passed", 2),
    "pass_2": Scenario(0.12, (("R1", "R2"), ("R2",), P), "passed", 3),
    "pass_3": Scenario(0.08, (("R1", "R2", "R3"), ("R2", "R3"), ("R3",), P), "passed", 4),
    "pass_5": Scenario(0.06, FIVE, "passed", 6, max_revisions=6),
    "never": Scenario(0.10, SWAP, BOUND, 4, cycle=True),
    "stuck": Scenario(0.09, (("R2",),), "escalated:build_stuck", 2),
    "needs_info": Scenario(0.05, (("R3",),), "escalated:build_needs_info", 1, needs_info="R3"),
    "check_fails": Scenario(0.05, (P,), "passed", 2, no_section_until=2),
    "clarify_never": Scenario(0.05, SWAP, BOUND, 4, cycle=True, clarify=True),
}
ANSWER = "The backend role: Go and Postgres, not SRE"  # the bench's answer to a clarifying question
LONG = "pass_5"


def markdown(rng: random.Random, chars: int, version: int, section: bool) -> str:
    """A résumé-like Markdown document of about `chars` characters."""
    head = f"# Jane Doe — Backend Engineer (draft v{version})\n\n"
    lines = [head, f"## {SECTION if section else 'Profile'}\n\n"]
    lines.append("Backend engineer, 6 years of Go and Postgres, on-call owner of billing.\n\n")
    lines.append("## Experience\n\n")
    size = sum(len(x) for x in lines)
    while size < chars:
        n = rng.randint(8, 16)
        bullet = (
            "- " + " ".join(rng.choice(WORDS) for _ in range(n)) + f" ({rng.randint(5, 60)}%)\n"
        )
        lines.append(bullet)
        size += len(bullet)
    return "".join(lines)


def judge_reply(sc: Scenario, failing: tuple[str, ...], artifact: str) -> dict[str, Any]:
    quote = artifact.splitlines()[-1][:120]  # evidence quoted from the version judged
    reqs = [
        {"id": f"R{i}", "pass": f"R{i}" not in failing,
         "evidence": quote if f"R{i}" in failing else "Go and Postgres",
         "fix": f"rewrite so that: {REQUIRE[i - 1]}" if f"R{i}" in failing else "",
         "needs_info": f"R{i}" == sc.needs_info}
        for i in range(1, len(REQUIRE) + 1)
    ]  # fmt: skip
    why_ok = f"R{len(REQUIRE) + 1}" not in failing
    return {
        "requirements": reqs,
        "serves_why": {"pass": why_ok, "reason": "fits the backend roles applied for"
                       if why_ok else "features a frontend project irrelevant to the role",
                       "fix": "" if why_ok else "lead with the billing service work"},
        "summary": "passes" if not failing else f"fails {', '.join(failing)}",
    }  # fmt: skip


def replies_for(rng: random.Random, sc: Scenario) -> dict[str, list[Any]]:
    base, growth = rng.randint(1000, 2600), rng.uniform(0.03, 0.07)
    gens, judges = [], []
    for v in range(1, sc.max_revisions + 2):
        text = markdown(rng, int(base * (1 + growth) ** (v - 1)), v, v >= sc.no_section_until)
        gens.append({"notes": f"v{v}: addressed the judge's findings", "artifact": text})
        judges.append(judge_reply(sc, sc.failing_at(v), text))
    plan = {"reason": "the request is clear", "requirements": [], "question": None}
    if sc.clarify:
        plan = {"reason": "two roles fit", "requirements": [], "question": "Backend or SRE role?"}
    return {"plan": [plan], "generate": gens, "judge": judges}


def write_home(home: Path, scenarios: list[str], rng: random.Random) -> None:
    """Config with one scripted model and agent per run, and each run's replies."""
    parts = ['[daemon]\npoll_interval_s = 0.05\nmax_concurrent_runs = 8\nlog_level = "error"\n']
    for i, name in enumerate(scenarios):
        sc = SCENARIOS[name]
        (home / f"replies-{i}.json").write_text(json.dumps(replies_for(rng, sc)))
        parts.append(
            f'[models.m{i}]\nprovider = "scripted"\nreplies = "replies-{i}.json"\n'
            f'request_log = "requests-{i}.jsonl"\n\n'
            f'[agents.a{i}]\nmodel = "m{i}"\nactions = ["finish"]\n\n'
            f"[agents.a{i}.build]\nmax_revisions = {sc.max_revisions}\n"
            f'checks = [{{kind = "sections", sections = ["{SECTION}"]}}]\n'
        )
    (home / "config.toml").write_text("\n".join(parts))


def create_runs(store: SyncStore, n: int, rng: random.Random) -> list[int]:
    """One goal and one build run per agent (a goal's memory grows with its builds: kept apart)."""
    material = "\n".join(f"- {rng.choice(WORDS)} role note {k}" for k in range(60))

    def work(c: Any) -> list[int]:
        out = []
        for i in range(n):
            goal_id = q.add_goal(c, title="get a backend job", agent=f"a{i}", criteria=[],
                                 why="move to a Go backend role by spring", deadline=None)  # fmt: skip
            spec = build_spec.make_spec("a one-page CV for Acme's backend role", list(REQUIRE),
                                        material)  # fmt: skip
            out.append(qa.create_build(c, goal_id=goal_id, agent=f"a{i}", spec=spec))
        return out

    return store.write(work)


def answer_clarifying(store: SyncStore) -> None:
    """The operator's side: a question before the first draft gets an answer at once."""
    asked = store.read(lambda c: [i for i in qi.list_items(c) if i.rule == "build_clarify"])
    for item in asked:
        inbox.answer(store, item.item_id, ANSWER)


def settled(store: SyncStore, run_ids: list[int]) -> bool:
    """Every run finished, or waiting on an open question (escalated)."""

    def work(c: Any) -> bool:
        asking = {i.run_id for i in qi.list_items(c)
                  if i.kind == InboxKind.QUESTION and i.rule != "build_clarify"}  # fmt: skip
        for run_id in run_ids:
            status = q.get_run(c, run_id).status
            if not (status.finished or (status == RunStatus.WAITING and run_id in asking)):
                return False
        return True

    return store.read(work)


async def drive(home: Path, store: SyncStore, run_ids: list[int], timeout_s: float) -> float:
    cfg = config.load(home / "config.toml")
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(daemon.serve(config.Paths(home), cfg, stop=stop))
    try:
        while not settled(store, run_ids):
            answer_clarifying(store)
            if task.done():
                task.result()
                raise RuntimeError("the daemon stopped before the runs settled")
            if time.perf_counter() - started > timeout_s:
                print(f"inner_loop: runs not settled after {timeout_s:.0f} s; measuring as is",
                      file=sys.stderr)  # fmt: skip
                break
            await asyncio.sleep(0.1)
        return time.perf_counter() - started
    finally:
        stop.set()
        await task


def measure(home: Path, store: SyncStore, i: int, run_id: int) -> dict[str, Any]:
    """One run's figures, from its rows and its model's request log."""

    def work(c: Any) -> dict[str, Any]:
        run = q.get_run(c, run_id)
        steps = q.list_steps(c, run_id)
        vs = qa.all_versions(c, run_id)
        asks = [x for x in qi.list_items(c, status=None, run_id=run_id)
                if x.kind == InboxKind.QUESTION]  # fmt: skip
        return {"status": str(run.status), "versions": [v["status"] for v in vs],
                "chars": [v["chars"] for v in vs],
                "tokens": sum(s.tokens_in + s.tokens_out for s in steps),
                "model_steps": sum(1 for s in steps if s.kind in (
                    StepKind.PLAN, StepKind.GENERATE, StepKind.JUDGE) and "model" in s.data),
                "asked": [x.rule for x in asks if x.status == "open"],
                "asked_all": [x.rule for x in asks],
                "notices": sum(1 for x in qi.list_items(c, status=None, run_id=run_id)
                               if x.kind == InboxKind.NOTICE)}  # fmt: skip

    out = store.read(work)
    path = home / f"requests-{i}.jsonl"
    reqs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    out["calls"] = Counter(r["purpose"] for r in reqs)
    out["other_runs_in_log"] = sum(1 for r in reqs if r["run_id"] != run_id)
    out["generate_bytes"] = [r["prompt_bytes"] for r in reqs if r["purpose"] == "generate"]
    out["judge_bytes"] = [r["prompt_bytes"] for r in reqs if r["purpose"] == "judge"]
    return out


def outcome(m: dict[str, Any]) -> str:
    if m["status"] == RunStatus.SUCCEEDED:
        return "passed"
    if m["status"] == RunStatus.WAITING and m["asked"]:
        return f"escalated:{m['asked'][-1]}"
    return m["status"]


def draw(rng: random.Random, n: int) -> list[str]:
    names = list(SCENARIOS)
    got = rng.choices(names, weights=[SCENARIOS[s].weight for s in names], k=n)
    if LONG not in got and n >= len(names):  # a 5th revision in every batch (see the docstring)
        got[rng.randrange(n)] = LONG
    return got


def batch(root: Path, b: int, runs: int, rng: random.Random, timeout_s: float) -> dict[str, Any]:
    home = root / f"batch-{b}"
    home.mkdir(parents=True)
    scenarios = draw(rng, runs)
    write_home(home, scenarios, rng)
    store = SyncStore(config.Paths(home).db)
    try:
        run_ids = create_runs(store, runs, rng)
        elapsed = asyncio.run(drive(home, store, run_ids, timeout_s))
        ms = [measure(home, store, i, r) for i, r in enumerate(run_ids)]
    finally:
        store.close()
    return summarize(scenarios, ms, elapsed)


def summarize(scenarios: list[str], ms: list[dict[str, Any]], elapsed: float) -> dict[str, Any]:
    ends = [outcome(m) for m in ms]
    by_rev, judged = _by_index(ms, "generate_bytes"), _by_index(ms, "judge_bytes")
    growth = [m["generate_bytes"][5] / m["generate_bytes"][0] for m in ms
              if len(m["generate_bytes"]) > 5]  # fmt: skip
    calls = [sum(m["calls"].values()) for m in ms]
    odd = [
        {"run": i, "scenario": s, "expected": [SCENARIOS[s].ends, SCENARIOS[s].versions],
         "got": [e, len(m["versions"])], "asked": m["asked_all"]}
        for i, (s, e, m) in enumerate(zip(scenarios, ends, ms, strict=True))
        if (e, len(m["versions"])) != (SCENARIOS[s].ends, SCENARIOS[s].versions)
    ]  # fmt: skip
    row: dict[str, Any] = {
        "runs": len(ms),
        "passed": ends.count("passed"),
        "escalated": sum(1 for e in ends if e.startswith("escalated")),
        "revisions_mean": round(statistics.fmean(max(len(m["versions"]) - 1, 0) for m in ms), 3),
        "model_calls_mean": round(statistics.fmean(calls), 3),
        "tokens_mean": round(statistics.fmean(m["tokens"] for m in ms), 1),
        "prompt_bytes_by_revision": by_rev,
    }
    if growth:  # the 5th revision's prompt over the first draft's, and over the 1st revision's
        row["prompt_growth_5th_vs_1st"] = round(statistics.fmean(growth), 3)
        row["prompt_growth_5th_vs_1st_revision"] = round(statistics.fmean(
            m["generate_bytes"][5] / m["generate_bytes"][1] for m in ms
            if len(m["generate_bytes"]) > 5), 3)  # fmt: skip
    row |= {
        "judge_prompt_bytes_by_version": judged,
        "escalated_by": dict(Counter(e.split(":", 1)[1] for e in ends if ":" in e)),
        "other_endings": dict(Counter(e for e in ends if e != "passed" and ":" not in e)),
        "scenarios": dict(Counter(scenarios)),
        "unexpected_endings": odd,
        "passed_without_notice": sum(1 for e, m in zip(ends, ms, strict=True)
                                     if e == "passed" and not m["notices"]),
        "calls_without_step": sum(c - m["model_steps"] for c, m in zip(calls, ms, strict=True)),
        "foreign_log_lines": sum(m["other_runs_in_log"] for m in ms),
        "artifact_chars_mean": round(statistics.fmean(c for m in ms for c in m["chars"]))
        if any(m["chars"] for m in ms) else 0,
        "by_scenario": {name: _scenario(name, scenarios, ends, ms) for name in SCENARIOS
                        if name in scenarios},
        "run_s": round(elapsed, 2),
    }  # fmt: skip
    return row


def _by_index(ms: list[dict[str, Any]], key: str) -> list[int]:
    """The mean of the Nth request's prompt bytes over the runs that made an Nth request."""
    sizes: dict[int, list[int]] = {}
    for m in ms:
        for n, size in enumerate(m[key]):
            sizes.setdefault(n, []).append(size)
    return [round(statistics.fmean(sizes[n])) for n in sorted(sizes)]


def _scenario(
    name: str, scenarios: list[str], ends: list[str], ms: list[dict[str, Any]]
) -> dict[str, Any]:
    mine = [(e, m) for s, e, m in zip(scenarios, ends, ms, strict=True) if s == name]
    return {
        "runs": len(mine),
        "ends": dict(Counter(e for e, _ in mine)),
        "versions_mean": round(statistics.fmean(len(m["versions"]) for _, m in mine), 2),
        "calls_mean": round(statistics.fmean(sum(m["calls"].values()) for _, m in mine), 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=50, help="build runs per batch")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path(".bench"))
    ap.add_argument("--timeout-s", type=float, default=120.0, help="per batch, then measure")
    a = ap.parse_args(argv)
    log.configure("error", fmt="console", stream=sys.stderr)  # serve() leaves logging to its caller
    root = a.workdir / "inner-loop"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(a.seed)
    rows = []
    for b in range(a.batches):
        row = batch(root, b, a.runs, rng, a.timeout_s)
        rows.append(row)
        print("RESULT " + json.dumps({"batch": b, **row}), flush=True)
        print(f"inner_loop: batch {b + 1}/{a.batches}: {row['passed']}/{row['runs']} passed, "
              f"{row['escalated']} escalated {row['escalated_by']}, "
              f"{row['revisions_mean']} revisions/run, {row['model_calls_mean']} calls/run, "
              f"{row['tokens_mean']:.0f} tokens/run, generate prompt bytes by revision "
              f"{row['prompt_bytes_by_revision']}, {len(row['unexpected_endings'])} unexpected "
              f"endings, {row['run_s']} s", file=sys.stderr, flush=True)  # fmt: skip
        for name, sc in row["by_scenario"].items():
            print(f"inner_loop:   {name:<13} {sc['runs']:>3} runs  {sc['versions_mean']:>4} "
                  f"versions  {sc['calls_mean']:>5} calls  {sc['ends']}", file=sys.stderr)  # fmt: skip
    growth = [r["prompt_growth_5th_vs_1st"] for r in rows if "prompt_growth_5th_vs_1st" in r]
    worst = max(growth) if growth else float("nan")
    runs = sum(r["runs"] for r in rows)
    print(
        f"SUMMARY runs={runs} passed={sum(r['passed'] for r in rows)} "
        f"escalated={sum(r['escalated'] for r in rows)} "
        f"unexpected={sum(len(r['unexpected_endings']) for r in rows)} "
        f"prompt_growth_5th_vs_1st_max={worst:.2f} (target < 5) "
        f"run_s={sum(r['run_s'] for r in rows):.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
