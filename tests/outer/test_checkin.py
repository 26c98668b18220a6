"""Check-ins end to end on a real SQLite file, a manual clock and scripted models: the precheck that
costs nothing, the model call and its journal, the effects (nudge, question, run, achieved), the
cadence the model cannot override, goal memory, and the operator's accept / dismiss."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import Config
from agentd.daemon import serve as daemon
from agentd.db import accounting, leases
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import memory as dbmem
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.store import Store
from agentd.harness.menu import Menu
from agentd.llm import ModelReply, ModelRequest, runbook
from agentd.llm.scripted import ScriptedProvider
from agentd.models import GoalStatus, InboxKind, InboxStatus, RunStatus, StepKind, Verdict
from agentd.operator import inbox
from agentd.outer import cadence, checkin, checkin_prompt, memory, verdicts
from agentd.outer.precheck import DEADLINE_STAGES, Facts, deadline_stage, lacking, precheck
from agentd.runs import control
from agentd.runs.deps import Deps
from agentd.runs.engine import RunDriver
from tests.conftest import Home

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC).timestamp()  # a Monday, 10:00 UTC
DAY = 86400.0
MIN_S = 4 * 3600.0

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"
request_log = "decisions.log"

[models.checker]
provider = "scripted"
replies = "checkins.json"
request_log = "checkins.log"

[actions.append]
type = "command"
argv = ["sh", "-c", "echo {word} >> __OUT__"]
params = { word = { pattern = "^[a-z]+$" } }

[agents.default]
actions = ["append", "finish", "notify"]
policy = { rules = { append = "approve" } }
__BUDGET__

[agents.default.checkin]
model = "checker"
every_s = 86400
min_s = 14400
max_s = 1209600
quiet = "00:00-00:01"
"""


class Recorder:
    """The check-in model: the scripted provider, with every request kept for assertions."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.name = inner.name
        self.inner = inner
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return await self.inner.complete(request)


@dataclass
class Env:
    home: Home
    deps: Deps
    clock: ManualClock
    model: Recorder
    out: Path
    launched: list[tuple[int, int]] = field(default_factory=list)

    def launch(self, run_id: int, epoch: int) -> None:
        self.launched.append((run_id, epoch))

    def read(self, work: Callable[[Any], Any]) -> Any:
        return self.home.store.read(work)

    def write(self, work: Callable[[Any], Any]) -> Any:
        return self.home.store.write(work)

    async def check(self, goal_id: int, at: float | None = None) -> qc.Checkin:
        """One fire of the goal's check-in at `at` (default: the goal's next look), run to its end."""
        if at is None:
            row = self.read(lambda c: qc.cadence_row(c, goal_id))
            at = row["next_at"] if row and row["next_at"] else self.clock.now()
        self.clock.set(at)
        checkin_id = self.write(lambda c: qc.add_due(c, goal_id, at, at))
        assert checkin_id is not None
        await checkin.run_checkin(self.deps, checkin_id, self.launch)
        done: qc.Checkin = self.read(lambda c: qc.get(c, checkin_id))
        return done

    def items(self, rule: str | None = None, status: str | None = None) -> list[Any]:
        found = self.read(lambda c: qi.list_items(c, status=status))
        return [i for i in found if rule is None or i.rule == rule]

    def calls(self) -> list[dict[str, Any]]:
        log = self.home.root / "checkins.log"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


Make = Callable[..., Any]


@pytest.fixture
async def make(home: Home, tmp_path: Path) -> AsyncIterator[Make]:
    stores: list[Store] = []

    async def build(checkins: list[Any], budget: str = "", checkin_more: str = "") -> Env:
        out = tmp_path / "out.txt"
        text = CONFIG.replace("__OUT__", str(out)).replace("__BUDGET__", budget) + checkin_more
        cfg: Config = home.write_config(text, [{"action": {"kind": "notify", "message": "hi"}}])
        (home.root / "checkins.json").write_text(json.dumps(checkins))
        home.store  # noqa: B018  # migrate before the async store opens
        store = Store(home.paths.db)
        await store.open()
        stores.append(store)
        deps = daemon.build_deps(cfg, store, owner="test:1")
        clock = ManualClock(T0)
        deps.clock = clock
        recorder = Recorder(deps.models["checker"])  # type: ignore[arg-type]
        deps.models["checker"] = recorder
        return Env(home, deps, clock, recorder, out)

    yield build
    for s in stores:
        await s.close()


def goal(env: Env, title: str = "keep the blog fresh", criteria: list[str] | None = None,
         deadline: float | None = None) -> int:  # fmt: skip
    return int(env.write(lambda c: q.add_goal(
        c, title=title, why="readers come back when there is news", agent="default",
        criteria=["a post a week"] if criteria is None else criteria, deadline=deadline,
    )))  # fmt: skip


def reply(verdict: dict[str, Any], next_look_in_s: float | None = None, reason: str = "") -> Any:
    return {"reason": reason or f"{verdict['kind']} for now", "next_look_in_s": next_look_in_s,
            "verdict": verdict}  # fmt: skip


NOTHING = reply({"kind": "nothing"})


def nudge(topic: str, message: str = "Write the post about the launch.", **more: Any) -> Any:
    return reply({"kind": "nudge", "topic": topic, "message": message, **more})


def world_moves(env: Env, n: int) -> None:
    env.write(lambda c: worlds.add_snapshot(c, "default", None, {"blog": {"posts": n}},
                                            {"blog": {"posts": [n - 1, n]}}))  # fmt: skip


def failed_run(env: Env, goal_id: int, summary: str = "the deploy broke") -> int:
    def work(c: Any) -> int:
        run_id = q.create_run(c, goal_id=goal_id, agent="default", trigger="test")
        epoch = leases.claim_run(c, run_id, "test:1", 60)
        control.finish(c, control.RunRef(run_id, goal_id, epoch, 2), RunStatus.FAILED, summary)
        return run_id

    return int(env.write(work))


# ── the precheck: nothing moved costs nothing ────────────────────────────────────────────────────


def first_snapshot(env: Env) -> None:
    """The poller's first look at the agent's source: every source is "new"."""
    env.write(lambda c: worlds.add_snapshot(c, "default", None, {"blog": {"posts": 3}},
                                            {"blog": "new"}))  # fmt: skip


async def test_a_sources_first_snapshot_is_a_baseline_not_a_change(make: Make) -> None:
    env = await make([NOTHING])
    goal_id = goal(env)
    first_snapshot(env)  # first boot: the poller looks after the goal was added
    done = await env.check(goal_id, T0)
    assert (done.status, done.reason) == ("skipped", "nothing moved")
    assert env.model.requests == []
    world_moves(env, 4)  # a real change afterwards still counts
    assert (await env.check(goal_id)).status != "skipped"
    assert len(env.model.requests) == 1


async def test_first_look_ask_looks_once_at_a_new_goal_and_says_why(make: Make) -> None:
    env = await make([NOTHING, NOTHING], checkin_more='first_look = "ask"\n')
    goal_id = goal(env)
    first_snapshot(env)
    first = await env.check(goal_id, T0)
    assert first.status != "skipped" and len(env.model.requests) == 1
    assert first.precheck["reasons"] == ['a first look at a new goal (checkin.first_look = "ask")']
    assert (await env.check(goal_id)).status == "skipped"  # once, not every fire
    assert len(env.model.requests) == 1


async def test_checkin_nothing_changed_is_skipped_without_model_call(make: Make) -> None:
    env = await make([NOTHING])
    goal_id = goal(env)
    first = await env.check(goal_id, T0)
    second = await env.check(goal_id)
    assert [first.status, second.status] == ["skipped", "skipped"]
    assert first.reason == "nothing moved" and env.calls() == [] and env.model.requests == []
    assert first.next_at == pytest.approx(T0 + DAY) and second.fired_at == first.next_at
    assert env.items() == []  # "nothing to report" never reaches the inbox


async def test_checkin_failed_run_since_asks_the_model(make: Make) -> None:
    env = await make([NOTHING])
    goal_id = goal(env)
    await env.check(goal_id, T0)
    run_id = failed_run(env, goal_id)
    row = await env.check(goal_id)
    assert row.status == "done" and row.decision and row.decision["verdict"] == {"kind": "nothing"}
    (call,) = env.calls()
    assert call["purpose"] == "checkin" and call["n"] == 1
    assert f"run {run_id} failed" in row.precheck["reasons"]
    assert "the deploy broke" in env.model.requests[0].prompt  # what moved, quoted as data
    assert [i.rule for i in env.items()] == [None]  # only the run's own notice: no check-in item
    texts = [e["text"] for e in env.read(lambda c: memory.recall(c, goal_id))]
    assert texts[0].startswith(f"run {run_id} failed") and texts[1].startswith("nothing to report")
    spend = env.read(lambda c: accounting.goal_spend(c, goal_id))
    assert spend["tokens"] == row.tokens_in + row.tokens_out > 0  # check-ins count as spend
    (used,) = env.read(lambda c: accounting.usage(c))
    assert (used["goal_id"], used["model"], used["calls"]) == (goal_id, row.model, 1)


async def test_checkin_model_proposing_a_minute_is_clamped_and_stopped_by_budget(
    make: Make,
) -> None:
    env = await make([reply({"kind": "nothing"}, next_look_in_s=60)],
                     budget="budget = { goal_tokens = 6000 }")  # fmt: skip
    goal_id = goal(env)
    rows: list[qc.Checkin] = []
    whys: list[str] = []
    for n in range(1, 13):  # something moves before every look: only the budget stops the calls
        world_moves(env, n)
        rows.append(await env.check(goal_id, None if rows else T0))
        whys.append(env.read(lambda c: qc.cadence_row(c, goal_id))["next_why"])
    asked = [r for r in rows if r.model is not None]
    assert 2 <= len(asked) < len(rows) and len(env.calls()) == len(asked)
    assert all(r.next_at is not None and r.next_at - r.fired_at >= MIN_S for r in rows)
    assert all(r.next_at == pytest.approx(r.fired_at + MIN_S) for r in asked)
    assert whys[0] == "model proposed 1m; clamped to the 4h minimum"
    stopped = rows[len(asked) :]
    assert all(r.status == "skipped" and "budget spent" in (r.reason or "") for r in stopped)
    spent = env.read(lambda c: accounting.goal_spend(c, goal_id))["tokens"]
    assert spent >= 6000 and spent - (asked[-1].tokens_in + asked[-1].tokens_out) < 6000


# ── relevance: clarifying questions first, no repeats ────────────────────────────────────────────


async def test_checkin_underspecified_goal_asks_before_any_nudge(make: Make) -> None:
    question = "What date is the party, and how many guests?"
    env = await make([
        nudge("order the cake"),  # refused in code: the goal lacks criteria and a deadline
        reply({"kind": "ask", "question": question}),
        nudge("order the cake", "Order a cake for 12 by Thursday.", new=None),
    ])  # fmt: skip
    goal_id = goal(env, title="plan a party", criteria=[])
    first = await env.check(goal_id, T0)  # nothing moved, but the goal is too vague to act on
    assert first.status == "done" and env.items(rule="nudge") == []
    assert "must_ask" in first.precheck and first.precheck["invalid"][0]["error"].startswith(
        "this goal lacks"
    )
    (asked,) = env.items(rule="clarify")
    assert asked.kind == InboxKind.QUESTION and asked.title == question and asked.run_id is None
    quiet = await env.check(goal_id)  # unanswered: nothing moved, no call
    assert quiet.status == "skipped" and len(env.calls()) == 2

    inbox.answer(env.home.store, asked.item_id, "Saturday the 14th, 12 guests, vegan cake")
    later = await env.check(goal_id)
    assert later.status == "done" and [c["n"] for c in env.calls()] == [1, 2, 3]
    before, after = env.model.requests[0], env.model.requests[-1]
    assert "12 guests, vegan cake" not in before.system + before.prompt
    said = '<operator>"Saturday the 14th, 12 guests, vegan cake"</operator>'
    assert f'<data>"Q: {question}"</data> → {said}' in after.system  # the question is model text
    assert "lacks" not in after.prompt  # the answer filled the gap: no "ask first" any more
    (posted,) = env.items(rule="nudge")
    assert posted.title.startswith("Order a cake for 12")


async def test_what_the_asking_look_saw_reaches_the_look_after_the_answer(make: Make) -> None:
    # The job bench: two postings appeared, the first look spent itself asking, and after the
    # answer no look saw them again — the world mark had moved past them.
    question = "What kind of role?"
    env = await make([reply({"kind": "ask", "question": question}), NOTHING])
    goal_id = goal(env, title="find a backend job", criteria=[])
    world_moves(env, 1)  # a posting, before the first look
    first = await env.check(goal_id, T0)
    (asked,) = env.items(rule="clarify")
    assert first.effect["kind"] == "ask" and len(env.model.requests) == 1
    world_moves(env, 2)  # another, while the question is open: no look for it (nothing to do)
    waiting = await env.check(goal_id)
    assert waiting.status == "skipped" and len(env.model.requests) == 1
    inbox.answer(env.home.store, asked.item_id, "senior backend, remote")
    after = await env.check(goal_id)
    assert after.status == "done" and len(env.model.requests) == 2
    prompt = env.model.requests[-1].prompt
    assert '"posts": [0, 1]' in prompt and '"posts": [1, 2]' in prompt  # both, after the answer


async def test_checkin_duplicate_nudge_on_the_same_topic_is_suppressed(make: Make) -> None:
    env = await make([
        nudge("publish the launch post"),
        nudge("Publish your launch post!"),  # the same topic while the first is open
        nudge("launch post publish"),  # after the dismissal, with nothing else new
        nudge("publish launch post", new="the launch date moved to Friday"),
    ])  # fmt: skip
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    (first,) = env.items(rule="nudge")
    world_moves(env, 2)
    again = await env.check(goal_id)
    assert again.effect and "still open" in again.effect["suppressed"]
    inbox.dismiss(env.home.store, first.item_id, reason="already scheduled", now=env.clock.now())
    held = await env.check(goal_id)
    assert held.precheck["reasons"] == [f"nudge {first.item_id} dismissed"]
    assert held.effect and "nothing new" in held.effect["suppressed"]
    assert len(env.items(rule="nudge")) == 1
    world_moves(env, 3)
    new = await env.check(goal_id)
    assert new.effect and "item_id" in new.effect
    latest = env.items(rule="nudge", status="open")[0]
    assert f"New since nudge {first.item_id}: the launch date moved to Friday." in latest.body


async def test_dismissed_topic_is_not_raised_again_within_a_day(make: Make) -> None:
    env = await make([nudge("publish the launch post"), nudge("publish the launch post")])
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    (first,) = env.items(rule="nudge")
    inbox.dismiss(env.home.store, first.item_id, now=T0 + 3600)
    world_moves(env, 2)
    soon = await env.check(goal_id, T0 + 5 * 3600)  # something new, but the "no" is fresh
    assert soon.effect and "dismissed less than a day ago" in soon.effect["suppressed"]
    assert len(env.items(rule="nudge")) == 1


# ── accept / dismiss / achieved ──────────────────────────────────────────────────────────────────


async def test_accept_starts_a_run_whose_first_decision_is_the_suggestion(make: Make) -> None:
    suggested = {"action": "append", "args": {"word": "hello"}}
    env = await make([nudge("say hello", "Append hello to the log.", suggested=suggested)])
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    (item,) = env.items(rule="nudge")
    assert f"agentd inbox accept {item.item_id}" in item.body and "append" in item.body
    accepted = inbox.accept(env.home.store, env.deps.config, item.item_id)
    run_id = accepted.data["run_id"]
    assert accepted.status == InboxStatus.ANSWERED and accepted.answer == "accepted"
    epoch = env.write(lambda c: leases.claim_run(c, run_id, "test:1", 60))
    driver = await RunDriver.load(env.deps, run_id, epoch)
    while await driver.advance():
        pass
    steps = env.home.steps(run_id)
    assert [s.kind for s in steps] == ["start", "observe", "decide", "check", "wait"]
    decide, check = steps[2], steps[3]
    assert decide.data["model"] == f"operator (accepted nudge {item.item_id})"
    assert (decide.action, decide.args) == ("append", {"word": "hello"})
    assert check.verdict == Verdict.APPROVE  # the harness decides: `append` waits for approval
    assert not env.out.exists() and not (env.home.root / "decisions.log").exists()
    (approval,) = env.items(status="open")[-1:]
    assert approval.kind == InboxKind.APPROVAL and approval.args == {"word": "hello"}
    texts = [e["text"] for e in env.read(lambda c: memory.recall(c, goal_id))]
    assert any(t.startswith(f"accepted nudge {item.item_id}") for t in texts)


async def test_dismissed_nudge_backs_the_cadence_off(make: Make) -> None:
    env = await make([nudge("publish the launch post"), NOTHING, NOTHING])
    goal_id = goal(env)
    world_moves(env, 1)
    first = await env.check(goal_id, T0)
    assert first.next_at == pytest.approx(T0 + DAY)
    (item,) = env.items(rule="nudge")
    inbox.dismiss(env.home.store, item.item_id, reason="not now", now=env.clock.now())
    cadence = env.read(lambda c: qc.cadence_row(c, goal_id))
    assert cadence and cadence["backoff"] == 1
    second = await env.check(goal_id)
    assert second.next_at is not None and second.next_at - second.fired_at == pytest.approx(2 * DAY)
    texts = [e["text"] for e in env.read(lambda c: memory.recall(c, goal_id))]
    assert any("dismissed nudge" in t and "not now" in t for t in texts)


async def test_ignored_nudge_backs_the_cadence_off_once(make: Make) -> None:
    env = await make([nudge("publish the launch post")])
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    second = await env.check(goal_id)  # the nudge is still open: ignored, counted once
    third = await env.check(goal_id)
    assert second.status == third.status == "skipped" and len(env.calls()) == 1
    assert env.read(lambda c: qc.cadence_row(c, goal_id))["backoff"] == 1
    assert second.next_at is not None and second.next_at - second.fired_at == pytest.approx(2 * DAY)


async def test_achieved_asks_to_confirm_and_yes_closes_the_goal(make: Make) -> None:
    env = await make([
        reply({"kind": "achieved", "evidence": "Four posts in four weeks."}),
        reply({"kind": "ask", "question": "Should the newsletter count too?"}),
    ])  # fmt: skip
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    (question,) = env.items(rule="achieved")
    assert question.kind == InboxKind.QUESTION and "agentd inbox answer" in question.body
    assert env.read(lambda c: q.get_goal(c, goal_id)).status == GoalStatus.ACTIVE
    world_moves(env, 2)
    await env.check(goal_id)  # a clarifying question of the goal is still open…
    (open_question,) = env.items(rule="clarify")
    inbox.answer(env.home.store, question.item_id, "yes")
    assert env.read(lambda c: q.get_goal(c, goal_id)).status == GoalStatus.ACHIEVED
    closed = env.read(lambda c: qi.get_item(c, open_question.item_id))
    assert closed.status == InboxStatus.EXPIRED  # …and is withdrawn with the goal
    after = await env.check(goal_id, env.clock.now() + DAY)
    assert (
        after.status == "skipped" and after.reason == "goal is achieved" and after.next_at is None
    )


async def test_achieved_answered_no_is_remembered_and_the_goal_stays(make: Make) -> None:
    env = await make([reply({"kind": "achieved", "evidence": "Four posts."})])
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    (question,) = env.items(rule="achieved")
    inbox.answer(env.home.store, question.item_id, "no, the newsletter is missing")
    assert env.read(lambda c: q.get_goal(c, goal_id)).status == GoalStatus.ACTIVE
    texts = [e["text"] for e in env.read(lambda c: memory.recall(c, goal_id))]
    assert "not achieved yet: no, the newsletter is missing" in texts


async def test_start_run_verdict_creates_and_launches_a_run(make: Make) -> None:
    env = await make([reply({"kind": "start_run", "request": "Draft the launch post."})])
    goal_id = goal(env)
    world_moves(env, 1)
    row = await env.check(goal_id, T0)
    assert row.effect is not None
    run_id = row.effect["run_id"]
    assert env.launched == [(run_id, env.read(lambda c: q.get_run(c, run_id)).lease_epoch)]
    run = env.read(lambda c: q.get_run(c, run_id))
    assert run.trigger == f"checkin:{row.checkin_id}" and run.status == RunStatus.RUNNING
    start = env.home.steps(run_id)[0]
    assert start.kind == StepKind.START and start.data["request"] == "Draft the launch post."


# ── failures: invalid replies, model errors ───────────────────────────────────────────────────────


async def test_checkin_invalid_reply_is_reasked_once_then_fails_visibly(make: Make) -> None:
    env = await make(["not json", {"verdict": {"kind": "maybe"}}, NOTHING])
    goal_id = goal(env)
    world_moves(env, 1)
    row = await env.check(goal_id, T0)
    assert row.status == "failed" and "unknown verdict kind 'maybe'" in (row.reason or "")
    assert [c["n"] for c in env.calls()] == [1, 2]
    assert "not valid JSON" in env.model.requests[1].prompt  # re-asked with the error
    assert row.next_at == pytest.approx(T0 + DAY)  # the next look as usual
    world_moves(env, 2)
    nxt = await env.check(goal_id)
    assert nxt.status == "done" and env.calls()[-1]["n"] == 3


async def test_failing_check_ins_become_one_notice_after_three_in_a_row(make: Make) -> None:
    env = await make(["not json"])
    goal_id = goal(env)
    for n in range(1, 5):
        world_moves(env, n)
        assert (await env.check(goal_id)).status == "failed"
        notices = env.items(rule="checkin_failed")
        assert len(notices) == (0 if n < 3 else 1)  # once per streak, not once per failure
    (notice,) = notices
    assert notice.title == f"Check-ins of goal {goal_id} failed 3 times in a row"
    assert "not valid JSON" in notice.body and notice.goal_id == goal_id


async def test_checkin_model_error_waits_with_backoff_then_retries(make: Make) -> None:
    env = await make(
        [{"error": "overloaded", "attempts": 2, "retry_after_s": 30, "reply": NOTHING}]
    )
    goal_id = goal(env)
    world_moves(env, 1)
    row = await env.check(goal_id, T0)
    assert row.status == "due" and row.precheck["retry_at"] == pytest.approx(T0 + 30)
    assert env.read(lambda c: qc.open_ids(c, T0 + 1)) == []  # no tight loop
    assert env.read(lambda c: qc.next_retry(c)) == pytest.approx(T0 + 30)
    await checkin.run_checkin(env.deps, row.checkin_id, env.launch)  # too early: nothing happens
    assert len(env.model.requests) == 1
    env.clock.set(T0 + 30)
    await checkin.run_checkin(env.deps, row.checkin_id, env.launch)
    row = env.read(lambda c: qc.get(c, row.checkin_id))
    assert row.status == "due" and row.precheck["attempts"] == 2
    env.clock.set(row.precheck["retry_at"])
    await checkin.run_checkin(env.deps, row.checkin_id, env.launch)
    done = env.read(lambda c: qc.get(c, row.checkin_id))
    assert done.status == "done" and [r.attempt for r in env.model.requests] == [1, 2, 3]


# ── goal memory and the pure precheck ────────────────────────────────────────────────────────────


async def test_goal_memory_stays_bounded(make: Make) -> None:
    env = await make([NOTHING])
    goal_id = goal(env)
    env.write(lambda c: dbmem.remember(c, goal_id, "answer", "the budget is 300 EUR", "t", T0))
    for n in range(200):
        env.write(lambda c, n=n: dbmem.remember(c, goal_id, "run", f"run {n} ok " + "x" * 300,
                                                "t", T0 + n))  # fmt: skip
    entries = env.read(lambda c: memory.recall(c, goal_id))
    rows = env.read(lambda c: c.execute(
        "SELECT count(*) FROM goal_memory WHERE goal_id = ?", (goal_id,)).fetchone()[0])  # fmt: skip
    assert rows <= dbmem.MAX_ENTRIES + 1 and sum(len(e["text"]) for e in entries) <= 4000
    assert entries[0]["kind"] == "earlier" and entries[-1]["text"].startswith("run 199 ok")
    assert any(e["text"] == "the budget is 300 EUR" for e in entries)  # the operator's words stay


def facts(**kw: Any) -> Facts:
    base: dict[str, Any] = {
        "since": T0 - DAY, "world_changes": 0, "runs_finished": [], "answers": [], "events": 0,
        "overdue_items": [], "deadline": None, "now": T0, "memory_facts": 0, "underspecified": [],
    }  # fmt: skip
    return Facts(**{**base, **kw})


def test_precheck_nothing_moved_does_not_look() -> None:
    assert precheck(facts()).look is False


def test_precheck_deadline_stage_change_requires_one_look_per_stage() -> None:
    deadline = T0 + 5 * DAY
    first = precheck(facts(deadline=deadline))
    assert first.look and first.reasons == ["the deadline is in 5 d"]
    same = precheck(facts(deadline=deadline, last_stage=first.stage, now=T0 + DAY))
    assert same.look is False  # still more than 3 d ahead: the same stage
    assert precheck(facts(deadline=deadline, last_stage=first.stage, now=T0 + 3 * DAY)).look
    stages = [deadline_stage(deadline, deadline - ahead) or 0 for ahead in DEADLINE_STAGES]
    assert stages == sorted(stages) and len(set(stages)) == len(DEADLINE_STAGES)
    assert deadline_stage(deadline, deadline - 20 * DAY) is None


def test_precheck_underspecified_goal_looks_once_to_ask() -> None:
    lacks = lacking("plan a party", "fun", [], None, answers=0)
    assert lacks == ["success criteria", "a deadline"]
    assert precheck(facts(underspecified=lacks)).must_ask
    assert precheck(facts(underspecified=lacks)).look
    assert not precheck(facts(underspecified=lacks, model_looks=1)).look
    assert lacking("plan a party", "fun", [], None, answers=1) == []


def test_runbook_answers_checkins_with_nothing() -> None:
    cfg = Config.model_validate({
        "models": {"default": {"provider": "runbook"}},
        "agents": {"default": {"actions": ["notify", "finish"]}},
    })  # fmt: skip
    menu = Menu(cfg, cfg.agents["default"])
    parsed = checkin_prompt.parse(json.dumps(runbook.CHECKIN_NOTHING), menu, must_ask=True)
    assert parsed.verdict == {"kind": "nothing"}


def test_same_topic_matches_rephrasings_only() -> None:
    assert verdicts.same_topic("publish the launch post", "Publish your launch post!")
    assert verdicts.same_topic("launch post", "publish launch post")
    assert not verdicts.same_topic("publish the launch post", "renew the domain")
    assert not verdicts.same_topic("", "renew the domain")
    # Two needs alike but for what they name are two needs (the job bench held one back).
    acme, globex = (
        "apply: Senior Backend Engineer (remote) at Acme",
        "apply: Senior Backend Engineer (remote) at Globex",
    )
    assert not verdicts.same_topic(acme, globex)
    assert verdicts.same_topic(acme, f"please {acme} soon")  # a reworded repeat still is one
    assert verdicts.same_topic(
        "restart the web service on Host", "restart web service on The Host now"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # Lowercase names distinguish as much as capitalised ones (the old guard held one back).
        ("apply to the acme senior backend role", "apply to the globex senior backend role"),
        ("apply to acme senior backend engineer", "apply to globex senior backend engineer"),
        ("renew the tls certificate for shop", "renew the tls certificate for blog"),
        ("fix incident 3 on the web service", "fix incident 4 on the web service"),
        ("send the invitations to the guests", "remind the guests about the party"),
    ],
)
def test_same_topic_two_needs_whatever_their_case(a: str, b: str) -> None:
    assert not verdicts.same_topic(a, b)
    assert not verdicts.same_topic(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "apply to the acme senior backend role",
            "please apply to the acme senior backend role soon",
        ),
        ("send the invitations", "Send invitations this week"),  # stems and fillers
        ("invite the guests", "invited guests today"),
        ("roll back deploy 1.4.2", "Roll back deploy 1.4.2 now"),
    ],
)
def test_same_topic_rewordings_stay_one_need(a: str, b: str) -> None:
    assert verdicts.same_topic(a, b)
    assert verdicts.same_topic(b, a)


# ── review fixes ─────────────────────────────────────────────────────────────────────────────────


async def test_dismissing_an_ignored_nudge_backs_off_once_not_twice(make: Make) -> None:
    env = await make([nudge("publish the launch post")])
    goal_id = goal(env)
    world_moves(env, 1)
    await env.check(goal_id, T0)
    await env.check(goal_id)  # a day later, still open: counted as ignored (backoff 1)
    (item,) = env.items(rule="nudge")
    inbox.dismiss(env.home.store, item.item_id, reason="late", now=env.clock.now())
    assert env.read(lambda c: qc.cadence_row(c, goal_id))["backoff"] == 1


async def test_checkin_recorded_before_a_snooze_does_not_ask_the_model(make: Make) -> None:
    env = await make([nudge("publish the launch post")])
    goal_id = goal(env)
    world_moves(env, 1)
    env.write(lambda c: c.execute(
        "UPDATE cadences SET snoozed_until = ?, updated_at = ? WHERE goal_id = ?",  # goal add's row
        (T0 + 2 * DAY, T0, goal_id),
    ))  # fmt: skip
    done = await env.check(goal_id, T0)
    assert done.status == "skipped" and done.reason == "goal snoozed" and env.calls() == []


async def test_fires_held_by_quiet_hours_run_once_at_their_end(make: Make) -> None:
    env = await make([NOTHING])
    goal_id = goal(env)
    world_moves(env, 1)
    # Quiet 22:00–08:00 UTC; three hourly fires recorded during the night, run at 08:00.
    env.write(lambda c: c.execute(
        "UPDATE cadences SET quiet = '22:00-08:00', tz = 'UTC', updated_at = ? WHERE goal_id = ?",
        (T0, goal_id),
    ))  # fmt: skip
    night = T0 - (T0 % DAY) + DAY + 2 * 3600  # 02:00 UTC the next day
    ids = [env.write(lambda c, t=t: qc.add_due(c, goal_id, t, t)) for t in
           (night, night + 3600, night + 7200)]  # fmt: skip
    env.clock.set(night + 6 * 3600)  # 08:00
    for checkin_id in ids:
        await checkin.run_checkin(env.deps, checkin_id, env.launch)
    rows = [env.read(lambda c, i=i: qc.get(c, i)) for i in ids]
    assert [r.status for r in rows[:2]] == ["skipped", "skipped"]
    assert all("quiet hours" in (r.reason or "") for r in rows[:2])
    assert rows[2].status == "done" and len(env.calls()) == 1


def test_looks_pushed_to_the_end_of_quiet_hours_are_spread_per_goal() -> None:
    cad = cadence.Cadence(
        every_s=DAY, min_s=3600, max_s=14 * DAY, quiet=(22 * 60, 8 * 60), tz="UTC"
    )
    end = T0 - (T0 % DAY) + DAY + 8 * 3600  # 08:00 UTC: where quiet hours push a look
    looks = {checkin.spread(cad, goal_id, 600, end, None) for goal_id in range(1, 11)}
    assert len(looks) > 5 and all(end <= t < end + 600 for t in looks)
    assert checkin.spread(cad, 1, 600, end, None) == checkin.spread(cad, 1, 600, end, None)
    midday = end + 4 * 3600  # not pushed by quiet hours: no drift from look to look
    assert checkin.spread(cad, 3, 600, midday, None) == midday
    assert checkin.spread(cad, 3, 600, end, end + 1) == end  # never past the deadline


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("заказать торт", "Заказать торт"),  # Cyrillic: a topic with words is one with itself
        ("ケーキを注文", "ケーキを注文"),
        ("Café Zürich booking", "cafe zurich booking"),  # accents folded
    ],
)
def test_same_topic_in_any_script(a: str, b: str) -> None:
    # the old guard saw no words outside a-z0-9: every repeat went out again
    assert verdicts.same_topic(a, b)


def test_same_topic_in_another_script_still_tells_two_needs_apart() -> None:
    assert not verdicts.same_topic("заказать торт", "заказать цветы")
