"""`agentd runs show`: a timeline that fits the terminal, world changes as diffs, each action
once (why, verdict, result), `--step N` in full, and `--follow` until the run ends — through the
real CLI against a real SQLite home."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db.store import SyncStore
from agentd.models import RunStatus, StepKind, StepStatus, Verdict

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]
"""
LOG_BEFORE = ["10:00 INFO up", "10:01 INFO /health 200", "10:02 INFO deployed v2"]
LOG_AFTER = ["10:01 INFO /health 200", "10:02 INFO deployed v2", "10:03 ERROR /health 500"]
ARGS = {"unit": "checkout.service", "reason": "health " * 40}
STDOUT = "".join(f"line {n} of the restart's output\n" for n in range(1, 11))
# What a hostile world does on a terminal: clear the screen, reorder text, hide characters.
HOSTILE = "\x1b[2J\x1b[Hforged\u202eevil\u200b"
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, [])
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def agentd(root: Path, *args: str, columns: int = 80) -> Result:
    result = CliRunner().invoke(
        app, ["--home", str(root), *args], env={"COLUMNS": str(columns)}, color=True
    )
    assert result.exit_code == 0, result.output
    return result


def observed(c: Any, run_id: int, epoch: int = 0) -> None:
    changes = {
        "health": {"status": [200, 500], "healthy": [True, False]},
        "service_log": {"lines": [LOG_BEFORE, LOG_AFTER], "size_bytes": [280, 364]},
        "disk": "new",
    }
    q.append_step(c, run_id, epoch, StepKind.OBSERVE, data={"changes": changes})


def acted(c: Any, run_id: int, epoch: int = 0, *, result: bool = True) -> None:
    """The model decides a restart, the harness allows it, it runs (and returns STDOUT)."""
    reason = {"reason": "health is 500 since the deploy"}
    q.append_step(c, run_id, epoch, StepKind.DECIDE, action="restart", args=ARGS, data=reason,
                  tokens_in=812, tokens_out=45)  # fmt: skip
    q.append_step(c, run_id, epoch, StepKind.CHECK, action="restart", args=ARGS,
                  verdict=Verdict.ALLOW, data={"rule": "policy: restart = allow"})  # fmt: skip
    act = q.append_step(c, run_id, epoch, StepKind.ACT, action="restart", args=ARGS,
                        status=StepStatus.STARTED, data={"approval": None})  # fmt: skip
    if result:
        done = {"ok": True, "exit_code": 0, "stdout": STDOUT, "duration_ms": 42.0}
        q.complete_step(c, run_id, epoch, act.seq, status=StepStatus.DONE, result=done)


def observed_and_acted(c: Any, run_id: int) -> None:
    observed(c, run_id)
    acted(c, run_id)


def timeline_of(text: str) -> list[str]:
    """The lines after the header (the header ends at the first blank line)."""
    return text[text.index("\n\n") + 2 :].splitlines()


# ── the timeline ──────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("columns", [60, 80, 132])
def test_runs_show_fits_the_terminal_width(cli_home: Any, columns: int) -> None:
    run_id = cli_home.start_run(cli_home.add_goal(title="Keep checkout healthy " * 10))
    cli_home.store.write(lambda c: observed_and_acted(c, run_id))
    cli_home.store.write(lambda c: c.execute(
        "UPDATE runs SET summary = ? WHERE run_id = ?", ("a long summary " * 30, run_id)))  # fmt: skip
    text = agentd(cli_home.root, "runs", "show", str(run_id), columns=columns).stdout
    assert max(len(line) for line in text.splitlines()) <= columns
    assert "a long summary " * 2 in " ".join(text.split())  # wrapped, not cut
    assert "…" in text  # the long arguments are cut


def test_world_changes_read_as_diffs(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: observed(c, run_id))
    lines = [
        line.strip() for line in agentd(cli_home.root, "runs", "show", "1").stdout.splitlines()
    ]
    assert "health.status: 200 → 500" in lines and "health.healthy: true → false" in lines
    assert "service_log.lines:" in lines
    assert "- 10:00 INFO up" in lines and "+ 10:03 ERROR /health 500" in lines
    assert "- 10:01 INFO /health 200" not in lines  # unchanged lines are not repeated
    assert "disk: first look" in lines
    assert "[[" not in " ".join(lines)  # no raw JSON of the old and new lists


def test_an_action_is_shown_once_with_its_reason_verdict_and_result(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: acted(c, run_id))
    lines = timeline_of(agentd(cli_home.root, "runs", "show", str(run_id), columns=120).stdout)
    mentions = [line for line in lines if "restart {" in line or "checkout.service" in line]
    assert len(mentions) == 1 and re.match(r"#2-4 +\d\d:\d\d:\d\d +act +restart \{", mentions[0])
    body = [line.strip() for line in lines]
    assert "why: health is 500 since the deploy (812/45 tokens)" in body
    assert "verdict: allow (policy: restart = allow)" in body
    assert "result: ok · exit 0 · 42 ms" in body
    assert "line 1 of the restart's output" in body and "… 7 more lines" in body


def test_an_action_still_executing_says_so(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: acted(c, run_id, result=False))
    text = agentd(cli_home.root, "runs", "show", str(run_id)).stdout
    assert "result: still running (its result comes when it ends)" in text


def test_an_approved_action_names_its_approval_where_it_ran(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())

    def journal(c: Any) -> None:
        q.append_step(
            c, run_id, 0, StepKind.DECIDE, action="restart", args={}, data={"reason": "r"}
        )
        q.append_step(c, run_id, 0, StepKind.CHECK, action="restart", args={},
                      verdict=Verdict.APPROVE, data={"rule": "policy: restart = approve"})  # fmt: skip
        woke = {"woke_by": "inbox", "why": "approval", "item_id": 7, "status": "approved"}
        q.append_step(c, run_id, 0, StepKind.WAKE, data=woke)
        q.append_step(c, run_id, 0, StepKind.ACT, action="restart", args={},
                      data={"approval": 7}, result={"ok": True})  # fmt: skip

    cli_home.store.write(journal)
    lines = timeline_of(agentd(cli_home.root, "runs", "show", str(run_id)).stdout)
    heads = [line.split()[2] for line in lines if line.startswith("#")]
    assert heads == ["start", "check", "wake", "act"]
    body = [line.strip() for line in lines]
    assert "verdict: approve (policy: restart = approve)" in body
    assert "approved: inbox item 7" in body and "result: ok" in body
    assert any("inbox item 7 approved" in line for line in body)


def test_json_carries_every_value_in_full(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: observed_and_acted(c, run_id))
    data = json.loads(agentd(cli_home.root, "runs", "show", str(run_id), "--json").stdout)
    assert [s["kind"] for s in data["steps"]] == ["start", "observe", "decide", "check", "act"]
    assert data["steps"][-1]["result"]["stdout"] == STDOUT
    assert data["steps"][1]["data"]["changes"]["service_log"]["lines"] == [LOG_BEFORE, LOG_AFTER]


# ── --step N ──────────────────────────────────────────────────────────────────────────────────


def test_step_n_shows_one_step_in_full(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: acted(c, run_id))
    text = agentd(cli_home.root, "runs", "show", str(run_id), "--step", "4").stdout
    assert text.startswith("step:") and "#4  act  [done]" in text
    assert all(f"line {n} of the restart's output" in text for n in range(1, 11))
    assert '"reason": "' + "health " * 40 in text.replace("\\n", "")  # the arguments, uncut
    data = json.loads(agentd(cli_home.root, "runs", "show", "1", "--step", "2", "--json").stdout)
    assert data["seq"] == 2 and data["data"]["reason"] == "health is 500 since the deploy"


def test_step_n_of_a_step_that_does_not_exist_exits_1(cli_home: Any) -> None:
    cli_home.start_run(cli_home.add_goal())
    result = CliRunner().invoke(
        app, ["--home", str(cli_home.root), "runs", "show", "1", "--step", "9"]
    )
    assert result.exit_code == 1 and "run 1 has no step 9" in result.stderr


def test_views_of_hostile_world_text_are_inert(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())

    def journal(c: Any) -> None:
        changes = {"web": {"body": ["ok", f"down{HOSTILE}\n{HOSTILE}"], HOSTILE: [1, 2]}}
        q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"changes": changes})
        q.append_step(c, run_id, 0, StepKind.ACT, action="fetch", args={"q": HOSTILE},
                      result={"ok": True, "stdout": f"{HOSTILE}\n{HOSTILE}", "stderr": HOSTILE})  # fmt: skip

    cli_home.store.write(journal)
    for args in (["runs", "show", "1"], ["runs", "show", "1", "--step", "2"],
                 ["runs", "show", "1", "--step", "3"]):  # fmt: skip
        out = agentd(cli_home.root, *args).stdout
        assert not UNSAFE.search(out), repr(UNSAFE.search(out))
        assert not [line for line in out.splitlines() if line.startswith("forged")]


# ── --follow ──────────────────────────────────────────────────────────────────────────────────


def test_follow_of_a_finished_run_prints_it_and_returns(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    epoch = cli_home.store.write(lambda c: leases.claim_run(c, run_id, "me", 60))
    cli_home.store.write(lambda c: qt.finish(c, run_id, epoch, RunStatus.SUCCEEDED, "all good"))
    text = agentd(cli_home.root, "runs", "show", str(run_id), "--follow").stdout
    assert "[succeeded]" in text and "finish   succeeded: all good" in text


def test_follow_prints_steps_as_they_happen_and_each_action_once(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    epoch = cli_home.store.write(lambda c: leases.claim_run(c, run_id, "me", 60))

    def the_run() -> None:  # another process's writes, from its own connection
        store = SyncStore(cli_home.paths.db)
        try:
            time.sleep(0.3)
            store.write(lambda c: observed(c, run_id, epoch))
            store.write(lambda c: acted(c, run_id, epoch, result=False))
            time.sleep(0.8)  # the follower looks meanwhile: the action is not shown yet
            act = store.read(lambda c: q.list_steps(c, run_id))[-1]
            store.write(lambda c: q.complete_step(c, run_id, epoch, act.seq,
                        status=StepStatus.DONE, result={"ok": True, "exit_code": 0}))  # fmt: skip
            store.write(lambda c: qt.finish(c, run_id, epoch, RunStatus.SUCCEEDED, "healthy again"))
        finally:
            store.close()

    writer = threading.Thread(target=the_run)
    writer.start()
    try:
        text = agentd(cli_home.root, "runs", "show", str(run_id), "--follow").stdout
    finally:
        writer.join()
    heads = [line.split()[2] for line in timeline_of(text) if line.startswith("#")]
    assert heads == ["start", "observe", "act", "finish"]
    assert "[running]" in text  # the header as it was when following began
    assert "result: ok · exit 0" in text and "still running" not in text
    assert "finish   succeeded: healthy again" in text


def test_follow_takes_neither_json_nor_step(cli_home: Any) -> None:
    cli_home.start_run(cli_home.add_goal())
    for extra in (["--json"], ["--step", "1"]):
        result = CliRunner().invoke(
            app, ["--home", str(cli_home.root), "runs", "show", "1", "--follow", *extra]
        )
        assert result.exit_code == 2 and "--follow" in result.stderr
