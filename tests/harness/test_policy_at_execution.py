"""The harness at the moment of execution: rate limits reserved with the intent, policy and menu
of the config in force, approvals bound to the action's definition, expiry, and the run states
that must never strand a run. Each test here failed on the code before the fix (issue 7)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.daemon.scheduler import Scheduler
from agentd.db import items as qi
from agentd.db import leases, meta
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.errors import Refused
from agentd.models import (
    GoalStatus,
    InboxKind,
    InboxStatus,
    RunStatus,
    StepKind,
    StepStatus,
    Verdict,
)
from agentd.operator import inbox
from tests.configs import FINISH, act, append_action, scripted_home
from tests.conftest import Home, finished, wait_for, waiting

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

NAP = '[actions.nap]\ntype = "sleep"\nmax_sleep_s = 60\n\n'
# A second action named `sleep`: a command, not the harness's sleep.
SLEEP_COMMAND = '[actions.sleep]\ntype = "command"\nargv = ["true"]\n\n'


def setup(
    home: Home,
    replies: list[Any],
    *,
    rules: str = "",
    limits: str = "",
    idempotent: bool = False,
    actions: Sequence[str] = ("append", "nap", "finish"),
    expire_s: float | None = None,
    out_name: str = "out.txt",
    more_actions: str = "",
) -> Path:
    """A home whose model logs its requests, `append` (keyed, `idempotent` or not) appending to
    `out_name` beside the home, `nap` a sleep of at most 60 s, the agent's policy `rules`, hourly
    `limits` and (with `expire_s`) approvals denied when not given in time."""
    out = home.root.parent / out_name
    expire = (
        f', expire = {{ approval = {{ after_s = {expire_s}, on_expire = "deny" }} }}'
        if expire_s is not None
        else ""
    )
    text = scripted_home(
        actions,
        rules=rules,
        policy=f"max_per_hour = {{ {limits} }}{expire}",
        tables=append_action(out, pattern="[a-z]+", idempotent=idempotent) + more_actions + NAP,
        request_log="requests.jsonl",
    )
    home.write_config(text, replies)
    return out


def append(word: str) -> dict[str, Any]:
    return act("append", f"append {word}", word=word)


def executed(out: Path) -> list[str]:
    return out.read_text().splitlines() if out.exists() else []


def cfg(home: Home) -> config.Config:
    return config.load(home.paths.config)


def approval_of(home: Home, run_id: int) -> Any:
    items = home.store.read(lambda c: qi.list_items(c, status=None, run_id=run_id))
    (item,) = [i for i in items if i.kind == InboxKind.APPROVAL]
    return item


def refusals(home: Home, run_id: int) -> list[Any]:
    return [s for s in home.steps(run_id) if s.kind == StepKind.CHECK and s.data.get("at")]


# ── rate limits are reservations ──────────────────────────────────────────────────────────────


async def test_rate_limit_holds_across_concurrent_runs(home: Home, serve: Any) -> None:
    # Idempotent: before the fix, the limit was counted at CHECK and logged only after the
    # command ended — four runs deciding together all ran.
    out = setup(home, [append("x"), FINISH], limits="append = 1", idempotent=True)
    runs = [home.start_run(home.add_goal()) for _ in range(4)]
    await serve()
    for run_id in runs:
        await wait_for(finished(home, run_id))
    assert len(executed(out)) == 1
    # Each of the other three is refused once by the limit: at CHECK when the first run's
    # reservation already stood, or at execution when all four passed CHECK together (which
    # of the two depends on how the runs interleave; the limit holds either way).
    denied = [
        s
        for r in runs
        for s in home.steps(r)
        if s.kind == StepKind.CHECK and s.verdict == Verdict.DENY and "rate limit" in s.data["rule"]
    ]
    assert len(denied) == 3
    at_execution = [s for r in runs for s in refusals(home, r)]
    assert {(s.run_id, s.seq) for s in at_execution} <= {(s.run_id, s.seq) for s in denied}
    notices = home.store.read(lambda c: qi.list_items(c, status=None))
    assert sum("refused at execution" in n.title for n in notices) == len(at_execution)


async def test_rate_limit_counts_approved_actions(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"', limits="append = 1")
    runs = [home.start_run(home.add_goal()) for _ in range(2)]
    await serve()
    for run_id in runs:
        await wait_for(waiting(home, run_id))
    for run_id in runs:  # both granted at once: only one may run within the hour
        inbox.approve(home.store, cfg(home), approval_of(home, run_id).item_id)
    for run_id in runs:
        await wait_for(finished(home, run_id))
    assert len(executed(out)) == 1
    statuses = sorted(approval_of(home, r).status for r in runs)
    assert statuses == [InboxStatus.CONSUMED, InboxStatus.EXPIRED]  # the other is closed


# ── the config in force decides, not the one at CHECK or approval time ───────────────────────


async def park_on_approval(home: Home, serve: Any, out: Path) -> tuple[int, Any]:
    run_id = home.start_run(home.add_goal())
    d = await serve()
    await wait_for(waiting(home, run_id))
    await d.shutdown()
    return run_id, approval_of(home, run_id)


async def test_approved_action_not_run_after_policy_becomes_deny(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    run_id, item = await park_on_approval(home, serve, out)
    inbox.approve(home.store, cfg(home), item.item_id)
    setup(home, [append("x"), FINISH], rules='append = "deny"')  # tightened while down
    await serve()
    await wait_for(finished(home, run_id))
    assert executed(out) == []
    (refused,) = refusals(home, run_id)
    assert refused.verdict == Verdict.DENY and "deny" in refused.data["rule"]
    assert approval_of(home, run_id).status == InboxStatus.EXPIRED


async def test_approved_action_not_run_after_removal_from_menu(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    run_id, item = await park_on_approval(home, serve, out)
    inbox.approve(home.store, cfg(home), item.item_id)
    setup(home, [append("x"), FINISH], actions=("nap", "finish"))
    await serve()
    await wait_for(finished(home, run_id))
    assert executed(out) == []
    assert any("no longer on" in s.data["rule"] for s in refusals(home, run_id))


async def test_approval_bound_to_the_action_definition(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    run_id, item = await park_on_approval(home, serve, out)
    assert item.data["resolved"]["argv"][0] == "sh"  # what will run is shown with the approval
    inbox.approve(home.store, cfg(home), item.item_id)
    # The operator's config now points the same action at another command.
    other = setup(home, [append("x"), FINISH], rules='append = "approve"', out_name="other.txt")
    await serve()
    await wait_for(lambda: home.run(run_id).status != RunStatus.RUNNING)
    await wait_for(lambda: bool(refusals(home, run_id)))
    assert executed(out) == [] and executed(other) == []
    (refused,) = refusals(home, run_id)
    assert "changed since approval" in refused.data["rule"]


def journal_checked(home: Home, verdict: Verdict) -> int:
    """A run whose journal ends with a CHECK of `append x` — as if the daemon died right
    after checking, under an older config."""
    run_id = home.start_run(home.add_goal())
    args = {"word": "x"}

    def work(c: Any) -> None:
        q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"changes": {}})
        q.append_step(c, run_id, 0, StepKind.DECIDE, action="append", args=args,
                      data={"reason": "r", "raw": "{}"})  # fmt: skip
        q.append_step(c, run_id, 0, StepKind.CHECK, action="append", args=args,
                      verdict=verdict, data={"rule": "old config"})  # fmt: skip

    home.store.write(work)
    return run_id


async def test_checked_allow_asks_approval_after_policy_becomes_approve(
    home: Home, serve: Any
) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    run_id = journal_checked(home, Verdict.ALLOW)
    await serve()
    await wait_for(waiting(home, run_id))
    assert executed(out) == []
    assert approval_of(home, run_id).status == InboxStatus.OPEN
    (refused,) = refusals(home, run_id)
    assert refused.verdict == Verdict.APPROVE


# ── expiry ───────────────────────────────────────────────────────────────────────────────────


async def test_expired_approval_cannot_be_granted_while_daemon_down(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"', expire_s=0.5)
    run_id, item = await park_on_approval(home, serve, out)
    await asyncio.sleep(0.6)
    with pytest.raises(Refused, match="expired"):
        inbox.approve(home.store, cfg(home), item.item_id)
    await serve()
    await wait_for(finished(home, run_id))
    assert executed(out) == []
    assert approval_of(home, run_id).status == InboxStatus.EXPIRED


async def test_approval_granted_after_expiry_is_never_consumed(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"', expire_s=0.3)
    run_id, item = await park_on_approval(home, serve, out)
    assert item.expires_at is not None
    await wait_for(lambda: time.time() > item.expires_at.timestamp(), 5)  # type: ignore[union-attr]
    # Granted late by hand (or an older CLI), whether or not the daemon expired it before it
    # stopped: the consume refuses it all the same.
    home.store.write(
        lambda c: c.execute(
            "UPDATE inbox SET status = 'approved', answer = 'ok', resolved_at = ?"
            " WHERE item_id = ?",
            (time.time(), item.item_id),
        )
    )
    await serve()
    await wait_for(finished(home, run_id))
    assert executed(out) == []


# ── small holes ──────────────────────────────────────────────────────────────────────────────


async def test_sleep_until_is_clamped_to_max_sleep(home: Home, serve: Any) -> None:
    far = "2099-01-01T00:00:00+00:00"
    setup(home, [{"reason": "later", "action": {"kind": "nap", "until": far}}, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    wake = home.run(run_id).next_wake_at
    assert wake is not None and wake.timestamp() <= time.time() + 60


async def test_idempotency_key_carries_the_database_id(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id))
    db_id = home.store.read(lambda c: meta.get_meta(c, "db_id"))
    assert len(db_id) == 8
    (line,) = executed(out)
    assert line.split()[0] == f"{db_id}:{run_id}:5"


def test_prune_keeps_snapshots_of_unfinished_runs(home: Home) -> None:
    setup(home, [FINISH])
    run_id = home.start_run(home.add_goal())

    def work(c: Any) -> int:
        snapshot_id = worlds.add_snapshot(c, "default", run_id, {"seen": 1}, {})
        worlds.add_snapshot(c, "default", None, {"seen": 2}, {})  # the agent's latest look
        q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"snapshot_id": snapshot_id})
        return snapshot_id

    snapshot_id = home.store.write(work)
    home.store.write(lambda c: meta.prune(c, time.time() + 3600))  # everything is "old"
    assert home.store.read(lambda c: worlds.get_snapshot(c, snapshot_id)) == {"seen": 1}


async def test_run_with_a_missing_snapshot_still_runs(home: Home, serve: Any) -> None:
    setup(home, [FINISH])
    run_id = home.start_run(home.add_goal())
    home.store.write(
        lambda c: q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"snapshot_id": 999})
    )
    await serve()
    await wait_for(finished(home, run_id))
    assert home.run(run_id).status == RunStatus.SUCCEEDED


async def test_orphaned_running_run_is_readopted(home: Home) -> None:
    setup(home, [FINISH])
    run_id = home.start_run(home.add_goal())
    other = home.start_run(home.add_goal())
    # Ours with no task driving it (a load failed): readopted. Another daemon's: never taken
    # here, whatever this process drives (a lapsed lease is the lease keeper's to claim).
    home.store.write(lambda c: leases.claim_run(c, run_id, "me", 300))
    home.store.write(lambda c: leases.claim_run(c, other, "other-daemon", 300))
    from agentd.daemon import serve as daemon
    from agentd.db.store import Store

    store = Store(home.paths.db)
    await store.open()
    try:
        launched: list[tuple[int, int]] = []
        deps = daemon.build_deps(cfg(home), store, "me")
        scheduler = Scheduler(deps, lambda r, e: launched.append((r, e)), lambda: set())
        await scheduler._readopt_orphans()
        assert launched == []  # orphaned once could be a run between commit and launch
        await scheduler._readopt_orphans()
        assert [r for r, _ in launched] == [run_id]
    finally:
        await store.close()


async def test_journaled_reply_is_parsed_not_asked_again(home: Home, serve: Any) -> None:
    out = setup(home, [append("fromthemodel"), FINISH])
    run_id = home.start_run(home.add_goal())
    raw = json.dumps(append("journaled"))

    def work(c: Any) -> None:
        q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"changes": {}})
        q.append_step(c, run_id, 0, StepKind.DECIDE, status=StepStatus.STARTED,
                      data={"raw": raw, "decision_no": 1, "model": "scripted"})  # fmt: skip

    home.store.write(work)
    await serve()
    await wait_for(finished(home, run_id))
    assert [line.split()[1] for line in executed(out)] == ["journaled"]
    requests = (home.root / "requests.jsonl").read_text().splitlines()
    assert [json.loads(r)["n"] for r in requests] == [2]  # decision 1 was never requested


def test_cancel_closes_a_granted_approval(home: Home) -> None:
    setup(home, [FINISH], rules='append = "approve"')
    run_id = home.start_run(home.add_goal())

    def work(c: Any) -> int:
        item_id = qi.post(c, InboxKind.APPROVAL, title="approve?", run_id=run_id,
                          action="append", args={"word": "x"}, digest="d")  # fmt: skip
        qi.resolve(c, item_id, InboxStatus.APPROVED, answer="ok")
        q.cancel(c, run_id, "changed my mind")
        return item_id

    item_id = home.store.write(work)
    assert home.store.read(lambda c: qi.get_item(c, item_id)).status == InboxStatus.EXPIRED


async def test_pausing_a_goal_stops_its_running_run(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH])
    goal_id = home.add_goal()
    run_id = home.start_run(goal_id)
    home.store.write(lambda c: q.set_goal_status(c, goal_id, GoalStatus.PAUSED))
    await serve()
    await wait_for(finished(home, run_id))
    assert home.run(run_id).status == RunStatus.CANCELLED
    assert executed(out) == []


async def test_edited_approval_shows_what_the_edit_will_run(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    _run_id, item = await park_on_approval(home, serve, out)
    assert 'KEY x"' in item.data["resolved"]["argv"][2]
    granted = inbox.approve(home.store, cfg(home), item.item_id, edit={"word": "y"})
    shown = granted.data["resolved"]["argv"][2]
    assert 'KEY y"' in shown and 'KEY x"' not in shown


async def test_pausing_a_goal_stops_an_approved_action(home: Home, serve: Any) -> None:
    out = setup(home, [append("x"), FINISH], rules='append = "approve"')
    run_id, item = await park_on_approval(home, serve, out)
    goal_id = home.run(run_id).goal_id
    home.store.write(lambda c: q.set_goal_status(c, goal_id, GoalStatus.PAUSED))
    inbox.approve(home.store, cfg(home), item.item_id)
    await serve()
    await wait_for(finished(home, run_id))
    assert executed(out) == []
    assert any("paused" in s.data["rule"] for s in refusals(home, run_id))


async def test_loop_detection_counts_a_command_named_sleep(home: Home, serve: Any) -> None:
    replies = [act("sleep", "again")] * 5 + [FINISH]
    actions = ("sleep", "append", "finish")
    setup(home, replies, idempotent=True, actions=actions, more_actions=SLEEP_COMMAND)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(lambda: home.run(run_id).status != RunStatus.RUNNING)
    checks = [s for s in home.steps(run_id) if s.kind == StepKind.CHECK]
    assert any(s.data["rule"].startswith("loop:") for s in checks)
