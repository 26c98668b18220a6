"""The outer-loop benchmark runs end to end — one seed, every scenario cut to three days — and
prints one parseable RESULT line per scenario and policy (a smoke test of the harness); and the two
scenarios about first snapshots, at full length on one seed, meet their targets: 200 idle goals at
first boot make no model call, and a source an agent gains by a reload costs none until it changes.
The other figures are measured by `make bench`, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("party", "job", "idle", "service", "many", "gains_source")
POLICIES = ("agentd", "heartbeat", "cron", "cron_nocatchup")
FIELDS = {
    "scenario", "policy", "model_calls_per_goal_day", "share_no_model", "deadline_met",
    "quiet_violations", "duplicate_nudges_24h", "catchups_per_outage", "silent_drops",
    "nudges_accepted", "nudges_dismissed",
}  # fmt: skip


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(ROOT / "bench" / "outer_loop.py"), "--seeds", "1",
            "--workdir", str(tmp_path), *args]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def results(stdout: str) -> list[dict[str, object]]:
    return [
        json.loads(line.removeprefix("RESULT "))
        for line in stdout.splitlines()
        if line.startswith("RESULT ")
    ]


@pytest.mark.slow
def test_outer_bench_one_short_seed_prints_a_result_per_scenario_and_policy(
    tmp_path: Path,
) -> None:
    done = bench(tmp_path, "--jobs", "2", "--max-days", "3")
    got = results(done.stdout)
    assert sorted((r["scenario"], r["policy"]) for r in got) == sorted(
        (s, p) for s in SCENARIOS for p in POLICIES
    )
    assert all(set(r) == FIELDS for r in got)
    assert done.stdout.splitlines()[-1].startswith("SUMMARY targets_passed=")
    assert "outer_loop: 6/6 runs" in done.stderr  # the progress line


@pytest.mark.slow
def test_outer_bench_first_snapshots_cost_no_model_call(tmp_path: Path) -> None:
    done = bench(tmp_path, "--jobs", "2", "--scenarios", "many,gains_source")
    lines = done.stdout.splitlines()
    many = [x for x in lines if "many (200 goals, first boot, idle 30 d): 0 model calls" in x]
    gains = [x for x in lines if x.startswith(("PASS  gains_source (", "FAIL  gains_source ("))]
    assert len(many) == 1 and many[0].startswith("PASS"), lines[-12:]
    assert len(gains) == 1 and gains[0].startswith("PASS"), lines[-12:]
    assert "0 model calls from the reload" in gains[0]
    by = {(r["scenario"], r["policy"]): r for r in results(done.stdout)}
    assert by["many", "agentd"]["model_calls_per_goal_day"] == 0
    assert by["many", "cron"]["model_calls_per_goal_day"] == 1  # the baselines make theirs
    assert by["gains_source", "agentd"]["deadline_met"] == 1
