"""Control actions and suspensions, each as ONE transaction over the journal and the inbox.

A question or approval is posted in the same transaction as the run's WAIT step, an approval is
consumed in the same transaction as the effect it authorizes, and a finish withdraws the run's open
items as it ends the run: no crash can separate a step from what it implies.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentd.clock import Clock
from agentd.config import BuiltinAction
from agentd.db import artifacts, memory
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import world as worlds
from agentd.db.conn import Conn
from agentd.models import JSON, InboxKind, RunStatus, Step, StepKind
from agentd.sources import changes, with_history
from agentd.text import cut_at_word


@dataclass(frozen=True)
class RunRef:
    """Which run a transaction writes for, under which lease epoch, at which next seq."""

    run_id: int
    goal_id: int
    epoch: int
    seq: int  # the seq the next journaled step will get
    db_id: str = ""  # the database's random id: keys stay unique across homes

    @property
    def key(self) -> str:
        return (
            f"{self.db_id}:{self.run_id}:{self.seq}" if self.db_id else f"{self.run_id}:{self.seq}"
        )


def control(
    c: Conn,
    ref: RunRef,
    cfg: BuiltinAction,
    action: str,
    args: JSON,
    digest: str,
    *,
    approval: int | None,
    events_seen: int,
    expires_at: float | None,
    clock: Clock,
) -> list[Step]:
    """notify / ask / sleep / wait_event: the ACT step plus its inbox item or wait. The caller
    has admitted the action (and consumed its approval) in the same transaction. `clock` is the
    injected one: wake times and timeouts are on it, as the scheduler compares them, and count
    from the WAIT step (`qt.suspend` stamps it and adds to the same reading), not from when the
    transaction began: journaling the act before it takes time, more on a loaded machine."""
    result: JSON = {"ok": True}
    if cfg.type == "build":  # a build run beside this one; this run goes on
        goal = q.get_goal(c, ref.goal_id)
        live = artifacts.live_builds(c, ref.goal_id)
        if live >= artifacts.MAX_LIVE_BUILDS:
            result = {"ok": False, "error": f"goal {ref.goal_id} has {live} builds under way "
                      f"(at most {artifacts.MAX_LIVE_BUILDS}); wait for one to finish"}  # fmt: skip
        else:  # requirements a run chose are the run's, not the operator's
            spec = {"request": args["request"], "requirements": list(args.get("requirements", [])),
                    "by": "run"}  # fmt: skip
            if args.get("deliver_args"):
                spec["deliver_args"] = dict(args["deliver_args"])
            result["build_run"] = artifacts.create_build(
                c, goal_id=ref.goal_id, agent=goal.agent, spec=spec,
                parent={"run_id": ref.run_id, "seq": ref.seq},
            )  # fmt: skip
    if cfg.type in ("notify", "ask"):
        kind = InboxKind.NOTICE if cfg.type == "notify" else InboxKind.QUESTION
        text = str(args.get("message") or args.get("question") or "")
        result["item_id"] = qi.post(
            c, kind, title=cut_at_word(text), body=text, goal_id=ref.goal_id, run_id=ref.run_id,
            seq=ref.seq, expires_at=expires_at if kind == InboxKind.QUESTION else None,
        )  # fmt: skip
    act = q.append_step(
        c, ref.run_id, ref.epoch, StepKind.ACT, action=action, args=args, digest=digest,
        result=result, data={"approval": approval, "key": ref.key},
    )  # fmt: skip
    if cfg.type in ("notify", "build"):
        return [act]
    if cfg.type == "ask":
        wait = {"kind": "inbox", "item_id": result["item_id"], "why": "question"}
        return [act, qt.suspend(c, ref.run_id, ref.epoch, wait, item_id=result["item_id"])]
    if cfg.type == "sleep":
        until = args.get("until")
        seconds = cfg.max_sleep_s if until else min(float(args["seconds"]), cfg.max_sleep_s)
        wait = {"kind": "timer", "why": "sleep"}  # suspend records its `until`
        return [
            act,
            qt.suspend(
                c, ref.run_id, ref.epoch, wait, wake_in_s=seconds, clock=clock,
                wake_at=datetime.fromisoformat(until).timestamp() if until else None,
            ),  # `until` obeys max_sleep_s like `seconds`
        ]  # fmt: skip
    timeout = args.get("timeout_s")
    wait = {
        "kind": "event", "event": args["event"], "match": args.get("match", {}),
        "why": "wait_event", "timeout_s": timeout,
    }  # fmt: skip
    # Events committed since the run last looked count: the order of "event arrives" and "run
    # starts waiting" must not matter.
    return [
        act,
        qt.suspend(
            c,
            ref.run_id,
            ref.epoch,
            wait,
            event=args["event"],
            after_event=events_seen,
            wake_in_s=float(timeout) if timeout else None,
            clock=clock,
        ),
    ]


def post_and_wait(c: Conn, ref: RunRef, kind: InboxKind, why: str, **item: Any) -> Step:
    """Post a question or approval and park the run on it."""
    item_id = qi.post(c, kind, goal_id=ref.goal_id, run_id=ref.run_id, **item)
    wait = {"kind": "inbox", "item_id": item_id, "why": why}
    if item.get("action"):
        wait["action"] = item["action"]
    return qt.suspend(c, ref.run_id, ref.epoch, wait, item_id=item_id)


def finish(
    c: Conn,
    ref: RunRef,
    status: RunStatus,
    summary: str,
) -> Step:
    """End the run, withdraw what it still asks, leave a notice with the summary, and remember
    the outcome in the goal's memory (what its check-ins read)."""
    qi.withdraw_open_items(c, ref.run_id, f"run {status}")
    title = f"run {ref.run_id} {status}: {cut_at_word(summary, 150)}"
    qi.post(c, InboxKind.NOTICE, title=title, body=summary, goal_id=ref.goal_id, run_id=ref.run_id)
    step = qt.finish(c, ref.run_id, ref.epoch, status, summary)
    memory.remember(c, ref.goal_id, "run", f"run {ref.run_id} {status}: {summary}",
                    f"run:{ref.run_id}", step.created_at.timestamp())  # fmt: skip
    return step


def record_world(
    c: Conn, agent: str, run_id: int | None, raw: JSON, now: float
) -> tuple[int, JSON, JSON, JSON | None]:
    """Store one look at an agent's world with its health history and what changed since the
    previous look (by a run or the poller). Returns (snapshot_id, world, changes, previous)."""
    prev = worlds.last_snapshot(c, agent)
    before = prev[1] if prev else None
    world = with_history(before, raw, now)
    diff = changes(before, world)
    return worlds.add_snapshot(c, agent, run_id, world, diff), world, diff, before
