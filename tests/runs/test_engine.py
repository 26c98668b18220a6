"""The engine end to end, in-process: a real store (a SQLite file, and a PostgreSQL database),
scripted model, real commands."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.clock import Clock, ManualClock, SystemClock
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import queries as q
from agentd.models import InboxKind, RunStatus, StepKind, StepStatus
from agentd.operator import inbox
from agentd.runs import control
from tests.configs import FINISH, act, append_action, scripted_home
from tests.conftest import Home, finished, wait_for, waiting

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

LAPSED_LEASE_S = -60.0  # a dead daemon's lease, lapsed a minute ago

ACTIONS = ("append", "finish", "ask", "sleep", "notify", "wait_event")


def write(
    home: Home,
    tmp_path: Path,
    replies: list[Any],
    rules: str | None = "",
    *,
    actions: Sequence[str] = ACTIONS,
    more_actions: str = "",
    **agent: str,
) -> Path:
    """The engine's home: `append` appends "<idempotency key> <word>" to tmp_path/out.txt, the
    agent may choose `actions` under the policy `rules` ("" an empty table, None no policy);
    `more_actions` are more action tables, `agent` more arguments of `scripted_home`."""
    out = tmp_path / "out.txt"
    tables = append_action(out) + more_actions
    home.write_config(scripted_home(actions, rules=rules, tables=tables, **agent), replies)
    return out


async def test_engine_runs_allowed_action_then_finishes(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(home, tmp_path, [act("append", word="hello"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id))
    assert home.run(run_id).status == RunStatus.SUCCEEDED
    kinds = [s.kind for s in home.steps(run_id)]
    assert kinds == [
        "start",
        "observe",
        "decide",
        "check",
        "act",
        "observe",
        "decide",
        "check",
        "finish",
    ]
    key, word = out.read_text().split()
    assert key.endswith(f":{run_id}:5") and word == "hello"  # DBID:run_id:seq


async def test_engine_gated_action_waits_for_approval(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(home, tmp_path, [act("append", word="gated"), FINISH], rules='append = "approve"')
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    assert not out.exists()
    (item,) = open_items(home)
    assert item.kind == InboxKind.APPROVAL and item.args == {"word": "gated"}
    assert item.rule == "policy: append = approve"
    inbox.approve(home.store, load(home), item.item_id)
    await wait_for(finished(home, run_id))
    assert out.read_text().split()[1:] == ["gated"]


def open_items(home: Home) -> list[Any]:
    return home.store.read(lambda c: qi.list_items(c, status="open"))


def load(home: Home) -> Any:
    return config.load(home.paths.config)


async def answer_question(home: Home, run_id: int, text: str = "carry on") -> str:
    await wait_for(waiting(home, run_id))
    (item,) = [i for i in open_items(home) if i.kind == InboxKind.QUESTION]
    inbox.answer(home.store, item.item_id, text)
    return item.body


async def test_engine_invalid_output_is_reasked_then_escalated(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(
        home,
        tmp_path,
        [
            "not json",
            {"action": {"kind": "rm -rf"}},
            '{"action": {"kind": "append", "word": "BAD"}}',
            "{}",
            FINISH,
        ],
    )
    run_id = home.start_run(home.add_goal())
    await serve()
    body = await answer_question(home, run_id)
    assert "4 invalid replies" in body
    await wait_for(finished(home, run_id))
    decides = [s for s in home.steps(run_id) if s.kind == StepKind.DECIDE]
    assert [bool(s.action) for s in decides] == [False, False, False, False, True]
    assert "unknown action 'rm -rf'" in decides[1].data["error"]
    assert decides[0].data["raw"] == "not json"  # the raw reply is journaled even when invalid
    assert not out.exists()


async def test_engine_loop_is_detected_and_sent_to_operator(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(home, tmp_path, [act("append", word="same")] * 3 + [FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    body = await answer_question(home, run_id, "stop repeating")
    assert "loop" in body
    await wait_for(finished(home, run_id))
    assert len(out.read_text().splitlines()) == 2  # the third identical proposal never ran


async def test_engine_denied_action_is_fed_back_then_escalated(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(
        home,
        tmp_path,
        [act("append", word="a"), act("append", word="b"), act("append", word="c"), FINISH],
        rules='append = "deny"',
    )
    run_id = home.start_run(home.add_goal())
    await serve()
    body = await answer_question(home, run_id)
    assert "refused" in body
    await wait_for(finished(home, run_id))
    checks = [s for s in home.steps(run_id) if s.kind == StepKind.CHECK]
    assert [str(c.verdict) for c in checks[:3]] == ["deny", "deny", "deny"]
    assert not out.exists()


async def test_engine_rate_limit_denies_over_the_hourly_budget(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    replies = [act("append", word="a"), act("append", word="b"), FINISH]
    out = write(home, tmp_path, replies, rules=None, policy="max_per_hour = { append = 1 }")
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id))
    checks = [s for s in home.steps(run_id) if s.kind == StepKind.CHECK]
    assert "rate limit" in checks[1].data["rule"]
    assert len(out.read_text().splitlines()) == 1


async def test_engine_answer_while_stopped_is_applied_at_start(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    write(home, tmp_path, [act("ask", question="which color?"), FINISH])
    run_id = home.start_run(home.add_goal())
    daemon = await serve()
    await wait_for(waiting(home, run_id))
    assert await daemon.shutdown() == 0
    (item,) = open_items(home)
    inbox.answer(home.store, item.item_id, "blue")
    await serve()
    await wait_for(finished(home, run_id))
    wake = next(s for s in home.steps(run_id) if s.kind == StepKind.WAKE)
    assert wake.data["answer"] == "blue"


async def test_engine_wait_event_wakes_on_matching_event_only(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    write(home, tmp_path, [act("wait_event", event="deploy", match={"env": "prod"}), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    home.store.write(lambda c: qi.add_event(c, "deploy", {"env": "staging"}, None))
    home.store.write(lambda c: qi.add_event(c, "other", {"env": "prod"}, None))
    await asyncio.sleep(0.3)
    assert home.run(run_id).status == RunStatus.WAITING
    home.store.write(lambda c: qi.add_event(c, "deploy", {"env": "prod", "v": 2}, "k1"))
    assert home.store.write(lambda c: qi.add_event(c, "deploy", {"env": "prod"}, "k1")) is None
    await wait_for(finished(home, run_id))
    wake = next(s for s in home.steps(run_id) if s.kind == StepKind.WAKE)
    assert wake.data["data"] == {"env": "prod", "v": 2}


async def test_engine_event_trigger_starts_one_run_per_goal(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    write(home, tmp_path, [FINISH], agent_keys='triggers = ["alert"]')
    goal_id = home.add_goal()
    await serve()
    home.store.write(lambda c: qi.add_event(c, "alert", {"n": 1}, None))
    await wait_for(lambda: bool(home.store.read(lambda c: q.list_runs(c, goal_id=goal_id))))
    (run,) = home.store.read(lambda c: q.list_runs(c, goal_id=goal_id))
    await wait_for(finished(home, run.run_id))
    assert run.trigger == "event:alert"


async def test_engine_sleep_resumes_after_the_timer(home: Home, tmp_path: Path, serve: Any) -> None:
    write(home, tmp_path, [act("sleep", seconds=0.3), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    await wait_for(finished(home, run_id))
    (wait_at, until), (wake_at, _) = parked_and_woken(home, run_id)
    assert until == wait_at + 0.3  # the same reading: the sleep counts from the WAIT step
    assert wake_at >= until  # the timer never wakes early


class SlowStepInserts:
    """A connection on a slow disk: each journal step's INSERT takes 50 ms (reads stay fast)."""

    def __init__(self, c: Any) -> None:
        self.c = c
        self.dialect = c.dialect
        self.IntegrityError = c.IntegrityError

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if sql.startswith("INSERT INTO steps"):
            time.sleep(0.05)  # the disk's time, not a wait for something
        return self.c.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        return self.c.executemany(sql, parameters)


def parked_and_woken(home: Home, run_id: int) -> list[tuple[float, float | None]]:
    """(created_at, the wait's `until`) of each WAIT and WAKE step as stored: the REAL columns and
    JSON floats themselves, not datetimes rounded to the microsecond."""
    rows = home.store.read(
        lambda c: c.execute(
            f"SELECT created_at, {c.dialect.jnum('data', 'until')} FROM steps"  # noqa: S608 - a hook
            " WHERE run_id = ? AND kind IN ('wait', 'wake') ORDER BY seq",
            (run_id,),
        ).fetchall()
    )
    return [(float(t), None if u is None else float(u)) for t, u in rows]


def park(
    home: Home, tmp_path: Path, action: str, args: dict[str, Any], clock: Clock
) -> tuple[int, list[Any]]:
    """Run `action` (a builtin control action) through control() on a connection whose step
    INSERTs each take 50 ms, as on a slow disk; the run's id and the steps it journaled."""
    write(home, tmp_path, [FINISH])
    cfg = config.load(home.paths.config).action(action)
    assert isinstance(cfg, config.BuiltinAction)
    goal_id = home.add_goal()
    run_id = home.start_run(goal_id)

    def work(c: Any) -> list[Any]:
        epoch = leases.claim_run(c, run_id, "test", 300)
        ref = control.RunRef(run_id=run_id, goal_id=goal_id, epoch=epoch, seq=2)
        return control.control(
            SlowStepInserts(c), ref, cfg, action, args, "digest",
            approval=None, events_seen=0, expires_at=None, clock=clock,
        )  # fmt: skip

    return run_id, home.store.write(work)


def next_wake_at(home: Home, run_id: int) -> float:
    row = home.store.read(
        lambda c: c.execute("SELECT next_wake_at FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    )
    return float(row[0])


def test_engine_sleep_counts_from_the_wait_step(home: Home, tmp_path: Path) -> None:
    """The timer of a sleep falls due `seconds` after the WAIT step, however long journaling the
    act before it took: set from the clock reading the act's transaction began with, it fell due
    that much early, and a prompt scheduler woke the run before it had slept its seconds. The
    WAIT step's time and the wake time are one reading, so they differ by exactly `seconds`."""
    run_id, (act, wait) = park(home, tmp_path, "sleep", {"seconds": 0.3}, SystemClock())
    assert (act.kind, wait.kind) == (StepKind.ACT, StepKind.WAIT)
    ((wait_at, until),) = parked_and_woken(home, run_id)
    assert until == wait_at + 0.3
    assert next_wake_at(home, run_id) == until
    assert wait.data["until"] == until  # the step as returned is the step as stored


@pytest.mark.parametrize(
    ("action", "args", "seconds"),
    [
        ("sleep", {"seconds": 0.3}, 0.3),
        ("wait_event", {"event": "deploy", "timeout_s": 7}, 7.0),
    ],
)
def test_engine_wake_times_are_on_the_injected_clock(
    home: Home, tmp_path: Path, action: str, args: dict[str, Any], seconds: float
) -> None:
    """On a simulated clock the wall's time spent journaling is not the clock's: the WAIT step
    and its wake time are the clock's reading, `seconds` apart, whatever the 50 ms inserts took."""
    clock = ManualClock(1_800_000_000.0)
    run_id, (_, wait) = park(home, tmp_path, action, args, clock)
    ((wait_at, _),) = parked_and_woken(home, run_id)
    assert wait_at == clock.t == wait.created_at.timestamp()
    assert next_wake_at(home, run_id) == clock.t + seconds


def test_engine_sleep_until_obeys_max_sleep_from_the_wait_step(home: Home, tmp_path: Path) -> None:
    """`until` is an absolute wake time, capped at max_sleep_s after the WAIT step."""
    clock = ManualClock(1_800_000_000.0)
    far = datetime.fromtimestamp(clock.t + 10**9, UTC).isoformat()
    run_id, (_, wait) = park(home, tmp_path, "sleep", {"until": far}, clock)
    cfg = config.load(home.paths.config).action("sleep")
    assert isinstance(cfg, config.BuiltinAction)
    assert next_wake_at(home, run_id) == wait.data["until"] == clock.t + cfg.max_sleep_s
    near = datetime.fromtimestamp(clock.t + 60, UTC).isoformat()
    run_id, (_, wait) = park(home, tmp_path, "sleep", {"until": near}, clock)
    assert next_wake_at(home, run_id) == wait.data["until"] == clock.t + 60


async def test_engine_model_error_backs_off_durably(home: Home, tmp_path: Path, serve: Any) -> None:
    failing = {"error": "overloaded", "retry_after_s": 0.2, "attempts": 2, "reply": FINISH}
    write(home, tmp_path, [failing], agent_tables="\n[agents.default.limits]\nretry_base_s = 0.1\n")
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id), timeout_s=15)
    waits = [s for s in home.steps(run_id) if s.kind == StepKind.WAIT]
    assert [w.data["why"] for w in waits] == ["model_retry", "model_retry"]
    assert [w.data["attempt"] for w in waits] == [1, 2]
    # each backoff counts from its WAIT step (at least the 0.2 s Retry-After) and no wake is early
    (w1, u1), (k1, _), (w2, u2), (k2, _) = parked_and_woken(home, run_id)
    assert u1 is not None and u2 is not None
    assert (u1 >= w1 + 0.2, k1 >= u1, u2 >= w2 + 0.2, k2 >= u2) == (True,) * 4
    assert home.run(run_id).status == RunStatus.SUCCEEDED


async def test_engine_max_steps_stops_the_run_visibly(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    limits = "\n[agents.default.limits]\nmax_steps = 3\nloop_threshold = 10\n"
    write(home, tmp_path, [act("notify", message="still here")], agent_tables=limits)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id))
    run = home.run(run_id)
    assert run.status == RunStatus.FAILED and "max_steps" in (run.summary or "")
    assert any("failed" in i.title for i in open_items(home))


async def test_engine_unknown_outcome_asks_instead_of_retrying(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    out = write(home, tmp_path, [FINISH])
    run_id = home.start_run(home.add_goal())

    # A journaled intent with no result: what a crash mid-action leaves behind. The dead
    # daemon's lease has lapsed (on PostgreSQL another daemon takes a run over only then).
    def intent(c: Any) -> None:
        epoch = leases.claim_run(c, run_id, "dead-daemon", LAPSED_LEASE_S)
        q.append_step(
            c,
            run_id,
            epoch,
            StepKind.ACT,
            status=StepStatus.STARTED,
            action="append",
            args={"word": "once"},
        )
        c.execute("UPDATE runs SET lease_owner = 'dead-daemon' WHERE run_id = ?", (run_id,))

    home.store.write(intent)
    await serve()
    body = await answer_question(home, run_id, "it did not happen; fine to finish")
    assert "cannot tell whether it happened" in body
    await wait_for(finished(home, run_id))
    assert not out.exists()  # never blindly re-executed


async def test_engine_expired_question_with_remind_posts_a_reminder_and_keeps_waiting(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    expire = '\n[agents.default.policy.expire.question]\nafter_s = 0.2\non_expire = "remind"\n'
    replies = [act("ask", question="which region?"), FINISH]
    write(home, tmp_path, replies, rules=None, agent_tables=expire)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(
        lambda: any(i.kind == InboxKind.NOTICE and "reminder" in i.title for i in open_items(home))
    )
    assert home.run(run_id).status == RunStatus.WAITING  # a reminder, never an answer
    (question,) = [i for i in open_items(home) if i.kind == InboxKind.QUESTION]
    assert question.data.get("reminders", 0) >= 1
    inbox.answer(home.store, question.item_id, "eu-west")
    await wait_for(finished(home, run_id))


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.backends("sqlite")  # SQLite's file lock and busy timeout
async def test_engine_run_survives_a_database_lock_longer_than_the_busy_timeout(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    """A write that meets a lock held past busy_timeout is retried; the run is not abandoned."""
    slow = '[actions.slow]\ntype = "command"\nargv = ["sleep", "1"]\nidempotent = true\n\n'
    write(home, tmp_path, [act("slow"), FINISH], actions=("slow", *ACTIONS), more_actions=slow)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(lambda: any(s.kind == StepKind.CHECK for s in home.steps(run_id)))
    blocker = sqlite3.connect(home.paths.db, isolation_level=None)
    # Another process holds the write lock for 14 s: every write in that time waits out the
    # daemon's 5 s busy timeout and fails, the action's result included.
    blocker.execute("BEGIN IMMEDIATE")
    await asyncio.sleep(14)
    blocker.execute("ROLLBACK")
    blocker.close()
    await wait_for(finished(home, run_id), timeout_s=40)
    assert home.run(run_id).status == RunStatus.SUCCEEDED
    assert [s.action for s in home.steps(run_id) if s.kind == StepKind.ACT] == ["slow"]


async def test_engine_run_of_a_removed_agent_fails_visibly(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    write(home, tmp_path, [FINISH])
    goal_id = home.store.write(
        lambda c: q.add_goal(c, title="old", why="t", agent="gone", criteria=[], deadline=None)
    )
    run_id = home.start_run(goal_id)
    await serve()
    await wait_for(finished(home, run_id))
    run = home.run(run_id)
    assert run.status == RunStatus.FAILED and "'gone' is no longer in the config" in (
        run.summary or ""
    )
    assert any("failed" in i.title for i in open_items(home))


async def test_engine_events_since_the_previous_look_are_part_of_the_next_look(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    write(home, tmp_path, [act("sleep", seconds=0.4), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    home.store.write(lambda c: qi.add_event(c, "deploy.done", {"version": "v2"}, None))
    await wait_for(finished(home, run_id))
    looks = [s for s in home.steps(run_id) if s.kind == StepKind.OBSERVE]
    assert looks[0].data["events"] == []
    assert [e["name"] for e in looks[1].data["events"]] == ["deploy.done"]
    assert looks[1].data["events"][0]["data"] == {"version": "v2"}
