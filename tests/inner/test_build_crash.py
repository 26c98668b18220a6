"""A build run survives SIGKILL without repeating a journaled model call (issue 9): killed while the
judge is being asked (the draft is journaled), it does not draft again; killed while the revision
is being asked (the verdict is journaled), it does not judge again. Real daemon subprocesses; the
scripted models' request log counts the calls."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.db import artifacts as qa
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.inner import spec as build_spec
from agentd.models import RunStatus
from tests.runs.test_crash import start_daemon, wait_ready

PLAN = {"reason": "clear", "requirements": [], "question": None}


def judged(*fails: str) -> dict[str, Any]:
    return {
        "requirements": [{"id": "R1", "pass": "R1" not in fails, "evidence": "x", "fix": "add Go",
                          "needs_info": False}],
        "serves_why": {"pass": True, "reason": "ok", "fix": ""},
        "summary": "judged",
    }  # fmt: skip


def write_home(home: Path, replies: dict[str, list[Any]]) -> None:
    home.mkdir(exist_ok=True)
    (home / "replies.json").write_text(json.dumps(replies))
    (home / "config.toml").write_text(
        textwrap.dedent(
            """
            [daemon]
            poll_interval_s = 0.05

            [models.default]
            provider = "scripted"
            replies = "replies.json"
            request_log = "requests.jsonl"

            [agents.default]
            actions = ["finish"]
            """
        )
    )


def calls(home: Path, purpose: str) -> list[dict[str, Any]]:
    path = home / "requests.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["purpose"] == purpose]


def kill_when_asked(home: Path, replies: dict[str, list[Any]], purpose: str, n: int) -> int:
    """Start a build, SIGKILL the daemon while the `n`th `purpose` call is in flight, restart it
    with the delay gone, and wait for the build to finish. Returns the run id."""
    write_home(home, replies)
    store = SyncStore(home / "agentd.db")
    goal = store.write(lambda c: q.add_goal(c, title="a job", why="rent", agent="default",
                                            criteria=[], deadline=None))  # fmt: skip
    spec = build_spec.make_spec("a CV", ["mentions Go"])
    run = store.write(lambda c: qa.create_build(c, goal_id=goal, agent="default", spec=spec))
    daemon = start_daemon(home)
    try:
        wait_ready(home, 1)
        deadline = time.monotonic() + 20
        while len(calls(home, purpose)) < n:
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.02)
        os.kill(daemon.pid, signal.SIGKILL)  # the call is in flight: nothing journaled for it
        daemon.wait(5)
        undelayed = {k: [e.get("reply", e) if isinstance(e, dict) else e for e in v]
                     for k, v in replies.items()}  # fmt: skip
        (home / "replies.json").write_text(json.dumps(undelayed))
        daemon = start_daemon(home)
        wait_ready(home, 2)
        deadline = time.monotonic() + 30
        while not store.read(lambda c: q.get_run(c, run)).status.finished:
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.05)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
    assert store.read(lambda c: q.get_run(c, run)).status == RunStatus.SUCCEEDED
    store.close()
    return run


def slow(reply: Any) -> dict[str, Any]:
    return {"reply": reply, "delay_s": 30}


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sigkill_between_generate_and_judge_does_not_draft_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    replies = {"plan": [PLAN], "generate": [{"notes": "", "artifact": "v1 with Go"}],
               "judge": [slow(judged())]}  # fmt: skip
    kill_when_asked(home, replies, "judge", 1)
    assert len(calls(home, "generate")) == 1  # the journaled draft was judged, not redone
    assert [r["n"] for r in calls(home, "judge")] == [1, 1]  # asked again: it was not journaled
    assert len(calls(home, "plan")) == 1


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sigkill_between_judge_and_revise_does_not_judge_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    replies = {
        "plan": [PLAN],
        "generate": [{"notes": "", "artifact": "v1"}, slow({"notes": "", "artifact": "v2 Go"})],
        "judge": [judged("R1"), judged()],
    }
    run = kill_when_asked(home, replies, "generate", 2)
    judges = [r["n"] for r in calls(home, "judge")]
    assert judges == [1, 2]  # v1's verdict was journaled: never asked for again
    assert [r["n"] for r in calls(home, "generate")] == [1, 2, 2]
    store = SyncStore(home / "agentd.db")
    assert [v["status"] for v in store.read(lambda c: qa.all_versions(c, run))] == [
        "failed",
        "passed",
    ]
    store.close()
