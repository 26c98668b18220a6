"""The outer-loop benchmark runs end to end — one seed, every scenario cut to three days — and
prints one parseable RESULT line per scenario and policy. A smoke test of the harness, not of its
figures (those are measured by `make bench`, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("party", "job", "idle", "service")
POLICIES = ("agentd", "heartbeat", "cron", "cron_nocatchup")
FIELDS = {
    "scenario", "policy", "model_calls_per_goal_day", "share_no_model", "deadline_met",
    "quiet_violations", "duplicate_nudges_24h", "catchups_per_outage", "silent_drops",
    "nudges_accepted", "nudges_dismissed",
}  # fmt: skip


@pytest.mark.slow
def test_outer_bench_one_short_seed_prints_a_result_per_scenario_and_policy(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, str(ROOT / "bench" / "outer_loop.py"), "--seeds", "1", "--jobs", "1",
            "--max-days", "3", "--workdir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=50, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    results = [
        json.loads(line.removeprefix("RESULT ")) for line in lines if line.startswith("RESULT ")
    ]
    assert sorted((r["scenario"], r["policy"]) for r in results) == sorted(
        (s, p) for s in SCENARIOS for p in POLICIES
    )
    assert all(set(r) == FIELDS for r in results)
    assert lines[-1].startswith("SUMMARY targets_passed=")
    assert "outer_loop: 4/4 runs" in done.stderr  # the progress line
