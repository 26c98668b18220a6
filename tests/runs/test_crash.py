"""Crash test: a real daemon process, SIGKILLed at random moments and restarted (DESIGN.md §4.2–4.3).

20 concurrent runs of a scripted agent whose non-idempotent action appends a line to a file. After 30+
kills: every run completed, no journal step lost, no non-idempotent action executed twice (counted by
its own side effect), no model decision requested again once it was journaled.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import InboxKind, RunStatus, StepKind, StepStatus
from tests import processes

RUNS = 20
KILLS = 30
STALL_S = 90.0  # no journal step written for this long while runs remain: they are stuck
WORDS = ["alpha", "bravo", "charlie", "delta"]


def replies() -> list[Any]:
    """Per run: four appends, with sleeps and slow decisions in between so kills land everywhere."""
    out: list[Any] = []
    for word in WORDS:
        out.append({"reply": {"action": {"kind": "append", "word": word}}, "delay_s": 0.05})
        out.append({"action": {"kind": "touch"}})  # idempotent: may re-run after a crash
        out.append({"action": {"kind": "sleep", "seconds": 0.4}})
    out.append({"action": {"kind": "finish", "outcome": "succeeded", "summary": "all appended"}})
    return out


def write_home(home: Path) -> Path:
    home.mkdir()
    effects = home / "effects.txt"
    (home / "replies.json").write_text(json.dumps(replies()))
    append = f'echo "$AGENTD_IDEMPOTENCY_KEY {{word}}" >> {effects}'
    verify = f'grep -q "^$AGENTD_IDEMPOTENCY_KEY " {effects} && echo done || echo not-done'
    (home / "config.toml").write_text(
        textwrap.dedent(
            f"""
            [daemon]
            poll_interval_s = 0.05
            max_concurrent_runs = {RUNS}

            [models.default]
            provider = "scripted"
            replies = "replies.json"
            request_log = "requests.log"

            [actions.append]
            type = "command"
            argv = ["sh", "-c", '{append}']
            verify_argv = ["sh", "-c", '{verify}']
            params = {{ word = {{ choices = {json.dumps(WORDS)} }} }}

            [actions.touch]
            type = "command"
            argv = ["true"]
            idempotent = true

            [agents.default]
            actions = ["append", "touch", "sleep", "finish"]
            limits = {{ loop_threshold = 10 }}
            """
        )
    )
    return effects


def open_items_of(store: SyncStore) -> list[tuple[int, str, str]]:
    return [(i.item_id, i.kind, i.title) for i in store.read(lambda c: qi.list_items(c))]


def start_daemon(home: Path) -> subprocess.Popen[bytes]:
    return processes.start(home, home / "daemon.log")


def wait_ready(home: Path, starts: int, timeout_s: float = 40) -> None:
    processes.wait_ready(None, home / "daemon.log", starts, timeout_s)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a hang guard only: 30 restarts took 210 s alone on a loaded machine
def test_crash_sigkill_loses_nothing_and_repeats_no_side_effect(tmp_path: Path) -> None:
    home = tmp_path / "home"
    effects = write_home(home)
    store = SyncStore(config.Paths(home).db)
    goal_ids = [
        store.write(
            lambda c, i=i: q.add_goal(
                c, title=f"g{i}", why="crash test", agent="default", criteria=[], deadline=None
            )
        )
        for i in range(RUNS)
    ]
    run_ids = [
        store.write(lambda c, g=g: q.create_run(c, goal_id=g, agent="default", trigger="test"))
        for g in goal_ids
    ]
    rng = random.Random(int(os.environ.get("AGENTD_CRASH_SEED", "7")))
    proc = start_daemon(home)
    wait_ready(home, 1)
    kills = 0
    try:
        while kills < KILLS:
            time.sleep(rng.uniform(0.02, 0.35))
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            proc = start_daemon(home)
            wait_ready(home, kills + 1)
        # Until every run ended, or the journal stopped growing for STALL_S: a loaded machine is
        # slow, not wrong, so only a run that makes no progress at all counts as stuck.
        written, moved = -1, time.monotonic()
        while time.monotonic() - moved < STALL_S:
            runs = [store.read(lambda c, r=r: q.get_run(c, r)) for r in run_ids]
            if all(r.status.finished for r in runs):
                break
            steps = store.read(lambda c: c.execute("SELECT count(*) FROM steps").fetchone()[0])
            if steps != written:
                written, moved = steps, time.monotonic()
            for item in store.read(lambda c: qi.list_items(c, status="open")):
                assert item.kind != InboxKind.APPROVAL
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert kills >= KILLS
    runs = [store.read(lambda c, r=r: q.get_run(c, r)) for r in run_ids]
    statuses = Counter(r.status for r in runs)
    stuck = {
        r.run_id: (r.status, r.wait, [(s.seq, s.kind, s.status) for s in store.read(
            lambda c, r=r: q.list_steps(c, r.run_id))][-3:])
        for r in runs if r.status != RunStatus.SUCCEEDED
    }  # fmt: skip
    assert statuses == {RunStatus.SUCCEEDED: RUNS}, (statuses, stuck, open_items_of(store))

    # No non-idempotent action executed twice: each (run, word) appended exactly once.
    lines = [ln.split() for ln in effects.read_text().splitlines()]
    per_run_word = Counter((key.split(":")[-2], word) for key, word in lines)
    assert all(n == 1 for n in per_run_word.values()), per_run_word.most_common(3)
    assert len(per_run_word) == RUNS * len(WORDS)

    requests = [json.loads(ln) for ln in (home / "requests.log").read_text().splitlines()]
    for run_id in run_ids:
        steps = store.read(lambda c, r=run_id: q.list_steps(c, r))
        # No journal step lost: contiguous sequence, every action has its result.
        assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
        acts = [s for s in steps if s.kind == StepKind.ACT]
        assert all(s.status == StepStatus.DONE for s in acts), [s.result for s in acts]
        appended = [s for s in acts if s.action == "append"]
        assert [s.args["word"] for s in appended] == WORDS if appended else False
        # Each line's key names the journaled intent that wrote it.
        keys = {s.data["key"] for s in appended}  # DBID:run_id:seq
        assert keys == {k for k, _ in lines if k.split(":")[-2] == str(run_id)}
        # No model decision requested again after it was journaled.
        decided = {
            s.data["decision_no"]: s.created_at.timestamp()
            for s in steps
            if s.kind == StepKind.DECIDE
        }
        for req in (
            r for r in requests if r["run_id"] == run_id and r.get("purpose", "decide") == "decide"
        ):
            assert req["t"] <= decided[req["n"]], (
                f"run {run_id} decision {req['n']} asked after journaling"
            )
    store.close()
    print(
        f"crash test: {kills} SIGKILLs, {len(requests)} model requests, {len(lines)} side effects"
    )
