"""Invariant 1 (DESIGN.md §4): approval is enforced in code, bound to a digest, consumed once.

A property test drives a real in-process daemon through random sequences of gated proposals and
operator responses (approve, approve with an edit, deny, crash), then checks the side-effect file
against the inbox: every executed line is backed by exactly one approval of exactly its digest,
consumed by that line's key; the example tests pin each part of the invariant on its own.

The last section holds tests for two bugs found on the way (an expiry race that kills the
scheduler, an "outcome unknown" question lost to a kill); they fail until those are fixed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agentd import config
from agentd.daemon import serve as daemon
from agentd.daemon.scheduler import Scheduler
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import world as worlds
from agentd.db.store import Store
from agentd.errors import Refused
from agentd.harness import prompt
from agentd.models import (
    InboxItem,
    InboxKind,
    InboxStatus,
    RunStatus,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)
from agentd.operator import inbox
from agentd.runs.deps import Deps
from tests.conftest import FreshStore, Home, finished, property_examples, wait_for, waiting

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

LAPSED_LEASE_S = -60.0  # a dead daemon's lease, lapsed a minute ago
WORDS = ("red", "green", "blue")

CONFIG = """
[daemon]
poll_interval_s = 0.02
shutdown_grace_s = 5

# Kills and restarts can lose a poke (it is best-effort by design): the safety-net scan that
# then notices the commit is kept short, so one example never waits out the 5 s default.
[api]
safety_scan_s = 0.5

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.append]
type = "command"
# The sleep after the write widens the window in which a kill finds it done but unrecorded.
argv = ["sh", "-c", "echo \\"$AGENTD_IDEMPOTENCY_KEY {word}\\" >> '__OUT__'; sleep 0.03"]
params = { word = { pattern = "^[a-z]+$" } }
__VERIFY__

[agents.default]
actions = ["append", "finish"]
policy = { rules = { append = "approve" }__EXPIRE__ }
limits = { loop_threshold = 100, max_denials = 100, max_steps = 200 }
"""

# `done` = the line keyed by this execution is in the file, `not-done` = it is not (never unknown).
VERIFY = (
    'verify_argv = ["sh", "-c", "test -e \'__OUT__\' || { echo not-done; exit 0; };'
    ' grep -q \\"^$AGENTD_IDEMPOTENCY_KEY \\" \'__OUT__\' && echo done || echo not-done"]'
)


def write_home(
    home: Home, replies: list[Any], *, verify: bool = True, expire_s: float | None = None
) -> Path:
    out = home.root.parent / "out.txt"
    expire = (
        f', expire = {{ approval = {{ after_s = {expire_s}, on_expire = "deny" }} }}'
        if expire_s is not None
        else ""
    )
    text = (
        CONFIG.replace("__VERIFY__", VERIFY if verify else "")
        .replace("__EXPIRE__", expire)
        .replace("__OUT__", str(out))
    )
    home.write_config(text, replies)
    if home.store_url is not None:
        # A killed daemon's running run goes to the next daemon once its lease lapsed (the
        # restart on SQLite takes it at once): a short lease, so the restart is soon in charge.
        # The [store] table is the config's last, so the key lands in it.
        with home.paths.config.open("a") as f:
            f.write("lease_s = 4.0\n")
    return out


def append(word: str) -> dict[str, Any]:
    return {"reason": f"append {word}", "action": {"kind": "append", "word": word}}


FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def executed(out: Path) -> list[tuple[str, str]]:
    """The side effect, as (idempotency key, word) per line."""
    if not out.exists():
        return []
    pairs = (line.split(" ", 1) for line in out.read_text().splitlines())
    return [(key, word) for key, word in pairs]


@dataclass(frozen=True)
class Approval:
    """An approval row as stored, including `consumed_by` (not part of InboxItem)."""

    item_id: int
    status: str
    args: dict[str, Any]
    digest: str
    consumed_by: str | None
    data: dict[str, Any]


def approvals(home: Home, run_id: int | None = None) -> dict[int, Approval]:
    """Approval rows of one run, or all of them."""
    # `? IS NULL` would leave PostgreSQL no type for the parameter: two statements instead
    sql = (
        "SELECT item_id, status, args, digest, consumed_by, data FROM inbox WHERE kind = 'approval'"
    )
    if run_id is None:
        rows = home.store.read(lambda c: c.execute(f"{sql} ORDER BY item_id").fetchall())
    else:
        rows = home.store.read(
            lambda c: c.execute(f"{sql} AND run_id = ? ORDER BY item_id", (run_id,)).fetchall()
        )
    return {
        r[0]: Approval(r[0], r[1], json.loads(r[2]), r[3], r[4], json.loads(r[5])) for r in rows
    }


def open_items(home: Home, run_id: int) -> list[InboxItem]:
    return [
        i
        for i in home.store.read(lambda c: qi.list_items(c, run_id=run_id))
        if i.kind != InboxKind.NOTICE
    ]


# ── an in-process daemon that can be killed ──────────────────────────────────────────────────────


class Daemon:
    """`daemon.serve` as a task. `kill` cancels it *and* every run task it drives at once, so no
    step of the old daemon outlives it — as close to SIGKILL as one process gets."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[int] | None = None

    async def start(self) -> Daemon:
        cfg = config.load(self.home.paths.config)
        ready = asyncio.Event()
        self.task = asyncio.create_task(
            daemon.serve(self.home.paths, cfg, ready=ready.set, stop=self.stop_event)
        )
        waiter = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait({self.task, waiter}, timeout=10, return_when="FIRST_COMPLETED")
        waiter.cancel()
        if self.task in done:
            self.task.result()  # raises the start-up error
        assert ready.is_set(), "daemon did not become ready in 10 s"
        return self

    def check_alive(self) -> None:
        assert self.task is not None
        if self.task.done():
            self.task.result()  # a daemon that died on its own re-raises its error here
            raise AssertionError("the daemon stopped on its own")

    async def kill(self) -> None:
        assert self.task is not None
        self.check_alive()
        me = asyncio.current_task()
        # A run task ending may relaunch its run (Engine._ended): sweep until none is left.
        for _ in range(10):
            victims = [
                t
                for t in asyncio.all_tasks()
                if t is not me
                and not t.done()
                and (t is self.task or t.get_name().startswith("run-"))
            ]
            if not victims:
                return
            for t in victims:
                t.cancel()
            await asyncio.wait(victims, timeout=10)
        raise AssertionError("run tasks kept being relaunched after the daemon was killed")

    async def shutdown(self) -> None:
        assert self.task is not None
        self.check_alive()
        self.stop_event.set()
        assert await asyncio.wait_for(self.task, 20) == 0


async def settle(home: Home, run_id: int, d: Daemon, timeout_s: float = 15.0) -> InboxItem | None:
    """Wait until the run finished (None) or waits on an open inbox item (that item)."""
    deadline = time.monotonic() + timeout_s
    while True:
        d.check_alive()
        run = home.run(run_id)
        if run.status.finished:
            return None
        wait = run.wait or {}
        if run.status == RunStatus.WAITING and wait.get("kind") == "inbox":
            item = home.store.read(functools.partial(qi.get_item, item_id=wait["item_id"]))
            if item.status == InboxStatus.OPEN:
                return item
        if time.monotonic() > deadline:
            tail = [(s.seq, str(s.kind), s.data) for s in home.steps(run_id)[-4:]]
            raise AssertionError(f"run {run_id} stuck: {run.status}, wait={wait}, last={tail}")
        await asyncio.sleep(0.01)


# ── the property ─────────────────────────────────────────────────────────────────────────────────

OPS = st.sampled_from(("approve", "edit", "deny"))
# "down": kill, respond while no daemon runs, restart. "after": respond, kill a moment later
# (before, during or after the execution), restart.
CRASHES = st.sampled_from(("none", "none", "down", "after"))
DELAYS_S = st.sampled_from((0.0, 0.01, 0.02, 0.03, 0.04, 0.06))


@dataclass(frozen=True)
class Response:
    """One planned operator response to an approval. Drawn up front, not at each wait: which
    state a kill lands in depends on timing, and hypothesis needs draws that do not."""

    op: str
    shift: int  # an edit replaces the word by the one `shift` places further in WORDS
    crash: str
    delay_s: float

    def edit_word(self, word: str) -> str:
        return WORDS[(WORDS.index(word) + self.shift) % len(WORDS)]


RESPONSES = st.lists(
    st.builds(Response, OPS, st.integers(1, len(WORDS) - 1), CRASHES, DELAYS_S), max_size=8
)
DEFAULT = Response("approve", 1, "none", 0.0)  # once the plan runs out


@dataclass
class Operator:
    """What the operator did, to hold the outcome against."""

    granted: dict[int, str] = field(default_factory=dict)  # item_id → word approved (maybe edited)
    edited_from: dict[int, str] = field(default_factory=dict)  # item_id → the original word
    denied: set[int] = field(default_factory=set)
    questions: int = 0


def respond(home: Home, cfg: config.Config, item: InboxItem, r: Response, who: Operator) -> None:
    """Apply one operator decision through agentd.operator.inbox, the real operator path."""
    if item.kind == InboxKind.QUESTION:
        inbox.answer(home.store, item.item_id, "unknown; carry on")
        who.questions += 1
        return
    word = (item.args or {})["word"]
    if r.op == "approve":
        inbox.approve(home.store, cfg, item.item_id)
        who.granted[item.item_id] = word
    elif r.op == "edit":
        inbox.approve(home.store, cfg, item.item_id, edit={"word": r.edit_word(word)})
        who.granted[item.item_id] = r.edit_word(word)
        who.edited_from[item.item_id] = word
    else:
        inbox.deny(home.store, item.item_id, reason="not that")
        who.denied.add(item.item_id)


async def drive(home: Home, run_id: int, plan: list[Response]) -> Operator:
    cfg = config.load(home.paths.config)
    who = Operator()
    d = await Daemon(home).start()
    try:
        for _ in range(100):
            item = await settle(home, run_id, d)
            if item is None:
                return who
            if item.kind == InboxKind.QUESTION:  # an outcome a kill left unknown
                respond(home, cfg, item, DEFAULT, who)
                continue
            r = plan.pop(0) if plan else DEFAULT
            if r.crash == "down":
                await d.kill()
                respond(home, cfg, item, r, who)
                d = await Daemon(home).start()
            elif r.crash == "after":
                respond(home, cfg, item, r, who)
                await asyncio.sleep(r.delay_s)
                await d.kill()
                d = await Daemon(home).start()
            else:
                respond(home, cfg, item, r, who)
        raise AssertionError("the run did not finish within 100 operator responses")
    finally:
        if d.task is not None and not d.task.done():
            await d.shutdown()


def check_outcome(home: Home, run_id: int, out: Path, who: Operator, verify: bool) -> None:
    lines = executed(out)
    items = approvals(home, run_id)
    by_key = {a.consumed_by: a for a in items.values() if a.consumed_by is not None}
    consumed = [a for a in items.values() if a.status == InboxStatus.CONSUMED]

    # Each execution key appears once: an approval executes at most once, crashes included.
    keys = Counter(key for key, _ in lines)
    assert all(n == 1 for n in keys.values()), f"an execution repeated: {lines}"
    # Every consumed approval names the one execution that used it, and no two share one.
    assert all(a.consumed_by for a in consumed)
    assert len(by_key) == len(consumed) == sum(1 for a in items.values() if a.consumed_by)

    for key, word in lines:
        # (1) nothing executes without an approval of exactly its digest, consumed by its key.
        assert key in by_key, f"line {key} {word} executed without a consumed approval"
        a = by_key[key]
        assert a.status == InboxStatus.CONSUMED
        assert a.args == {"word": word}
        assert a.digest == action_digest("append", {"word": word})
        # (3) an edited approval executes the edited word, never the original.
        assert who.granted.get(a.item_id) == word
        if a.item_id in who.edited_from:
            assert a.data["original_args"] == {"word": who.edited_from[a.item_id]}
            assert a.data["original_digest"] != a.digest

    # Everything granted was used (nothing lost across crashes); nothing denied was.
    assert {a.item_id for a in consumed} == set(who.granted)
    assert all(items[i].status == InboxStatus.DENIED for i in who.denied)
    # The journal agrees: each act of `append` names its approval, bound to the same digest.
    unknown: set[str] = set()
    for s in home.steps(run_id):
        if s.kind != StepKind.ACT or s.action != "append":
            continue
        a = items[s.data["approval"]]
        assert (a.consumed_by, a.digest, a.args) == (s.data["key"], s.digest, s.args)
        result = s.result or {}
        if result.get("outcome") == "unknown":
            unknown.add(s.data["key"])
        event(f"act recovered: {result.get('recovered', 'no')}")
        event(f"act outcome: {result.get('outcome', 'known')}")
    # (2) each consumed approval executed exactly once — or, where a kill left its outcome unknown
    # (no verify_argv), at most once and the operator was asked.
    assert (not unknown) if verify else (len(unknown) <= who.questions)
    assert {a.consumed_by for a in consumed} - keys.keys() <= unknown
    assert home.run(run_id).status == RunStatus.SUCCEEDED


@pytest.mark.timeout(240)
def test_approval_property_gated_actions_execute_only_as_approved(
    backend: str, fresh_store_url: FreshStore
) -> None:
    # The property is built here, its example count by engine (tests/conftest.py).
    @settings(
        max_examples=property_examples(backend, 25),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        verify=st.booleans(),
        plan=RESPONSES,
    )
    def gated(words: list[str], verify: bool, plan: list[Response]) -> None:
        # A fresh home, store and event loop per example: nothing (daemon tasks, lock, DB) leaks
        # between them.
        with tempfile.TemporaryDirectory(prefix="agentd-prop-") as tmp, fresh_store_url() as url:
            home = Home(Path(tmp) / "home", url)
            try:
                out = write_home(home, [*map(append, words), FINISH], verify=verify)
                run_id = home.start_run(home.add_goal())
                who = asyncio.run(drive(home, run_id, list(plan)))
                check_outcome(home, run_id, out, who, verify)
            finally:
                home.close()

    gated()


# ── examples ─────────────────────────────────────────────────────────────────────────────────────


def _cfg(home: Home) -> config.Config:
    return config.load(home.paths.config)


async def test_approval_approved_action_executes_once(home: Home, serve: Any) -> None:
    out = write_home(home, [append("go"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = open_items(home, run_id)
    inbox.approve(home.store, _cfg(home), item.item_id)
    await wait_for(finished(home, run_id))
    ((key, word),) = executed(out)
    assert word == "go"
    assert approvals(home, run_id)[item.item_id].consumed_by == key
    with pytest.raises(Refused):  # already consumed: a second execution cannot use it
        home.store.write(lambda c: qi.consume_approval(c, item.item_id, item.digest or "", "x:1"))


async def test_approval_denied_action_never_executes_and_is_fed_back(
    home: Home, serve: Any
) -> None:
    out = write_home(home, [append("go"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = open_items(home, run_id)
    inbox.deny(home.store, item.item_id, reason="not on a friday")
    await wait_for(finished(home, run_id))
    assert not out.exists()
    steps = home.steps(run_id)
    assert not [s for s in steps if s.kind == StepKind.ACT and s.action == "append"]
    # The next decision's history carries the denial and its reason.
    second = [s for s in steps if s.kind == StepKind.DECIDE][1]
    history = "\n".join(prompt.render_step(s) for s in steps if s.seq < second.seq)
    assert '"status": "denied"' in history and "not on a friday" in history


async def test_approval_edited_args_execute_instead_of_original(home: Home, serve: Any) -> None:
    out = write_home(home, [append("original"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = open_items(home, run_id)
    granted = inbox.approve(home.store, _cfg(home), item.item_id, edit={"word": "edited"})
    assert granted.digest == action_digest("append", {"word": "edited"}) != item.digest
    await wait_for(finished(home, run_id))
    assert [word for _, word in executed(out)] == ["edited"]
    assert approvals(home, run_id)[item.item_id].status == InboxStatus.CONSUMED


async def test_approval_expired_never_executes(home: Home, serve: Any) -> None:
    out = write_home(home, [append("late"), FINISH], expire_s=0.2)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = open_items(home, run_id)
    await wait_for(finished(home, run_id))
    assert approvals(home, run_id)[item.item_id].status == InboxStatus.EXPIRED
    with pytest.raises(Refused):  # too late: an expired approval cannot be granted any more
        inbox.approve(home.store, _cfg(home), item.item_id)
    assert not out.exists()


async def test_approval_expiry_wakes_the_run_without_the_safety_scan(
    home: Home, serve: Any
) -> None:
    """The scheduler's own expiry is a change like any other: the run waiting on the item is
    woken in the same tick, not at the next safety-net scan (60 s here, beyond the test's wait)."""
    out = write_home(home, [append("late"), FINISH], expire_s=0.2)
    config_text = home.paths.config.read_text()
    home.paths.config.write_text(config_text.replace("safety_scan_s = 0.5", "safety_scan_s = 60"))
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = open_items(home, run_id)
    await wait_for(lambda: home.run(run_id).status != RunStatus.WAITING)
    wake = next(s for s in home.steps(run_id) if s.kind == StepKind.WAKE)
    assert wake.data["item_id"] == item.item_id and wake.data["status"] == "expired"
    assert item.expires_at is not None
    late_s = (wake.created_at - item.expires_at).total_seconds()
    print(f"\nexpiry due → run woken: {late_s * 1000:.1f} ms (safety scan: 60 s)")
    await wait_for(finished(home, run_id))
    assert not out.exists()


def _approved_item(home: Home, word: str) -> InboxItem:
    """An approved (not yet consumed) approval of `append word`, straight in the inbox table."""
    digest = action_digest("append", {"word": word})

    def work(c: Any) -> InboxItem:
        item_id = qi.post(
            c,
            InboxKind.APPROVAL,
            title="approve append?",
            action="append",
            args={"word": word},
            digest=digest,
        )
        return qi.resolve(c, item_id, InboxStatus.APPROVED, answer="approved")

    return home.store.write(work)


def test_approval_consume_refuses_another_digest(home: Home) -> None:
    write_home(home, [FINISH])
    item = _approved_item(home, "safe")
    other = action_digest("append", {"word": "unsafe"})
    with pytest.raises(Refused):
        home.store.write(lambda c: qi.consume_approval(c, item.item_id, other, "1:5"))
    assert approvals(home)[item.item_id].status == InboxStatus.APPROVED


def test_approval_consume_twice_is_refused(home: Home) -> None:
    write_home(home, [FINISH])
    item = _approved_item(home, "once")
    digest = item.digest or ""
    home.store.write(lambda c: qi.consume_approval(c, item.item_id, digest, "1:5"))
    with pytest.raises(Refused):
        home.store.write(lambda c: qi.consume_approval(c, item.item_id, digest, "1:9"))
    assert approvals(home)[item.item_id].consumed_by == "1:5"


def test_approval_open_or_denied_cannot_be_consumed(home: Home) -> None:
    write_home(home, [FINISH])
    digest = action_digest("append", {"word": "w"})
    opened = home.store.write(
        lambda c: qi.post(
            c, InboxKind.APPROVAL, title="t", action="append", args={"word": "w"}, digest=digest
        )
    )
    denied = home.store.write(
        lambda c: qi.post(
            c, InboxKind.APPROVAL, title="t", action="append", args={"word": "w"}, digest=digest
        )
    )
    inbox.deny(home.store, denied)
    for item_id in (opened, denied):
        with pytest.raises(Refused):
            home.store.write(
                functools.partial(qi.consume_approval, item_id=item_id, digest=digest, key="1:5")
            )


# ── found while writing the property (failing until fixed) ───────────────────────────────────────


class ApprovesAfterExpiryRead(Store):
    """The daemon's store, plus an operator who approves right after the scheduler has read the
    items due for expiry — the race window of Scheduler._expire, made deterministic."""

    def __init__(self, path: Path, approve: Callable[[], object]) -> None:
        super().__init__(path)
        self.approve: Callable[[], object] | None = approve

    async def read(self, work: Any) -> Any:
        result = await super().read(work)
        approve = self.approve
        if approve and isinstance(result, list) and result and isinstance(result[0], InboxItem):
            self.approve = None
            await asyncio.to_thread(approve)
        return result


async def test_approval_granted_as_it_expires_keeps_the_scheduler_alive(home: Home) -> None:
    write_home(home, [FINISH])
    digest = action_digest("append", {"word": "w"})
    item_id = home.store.write(
        lambda c: qi.post(
            c,
            InboxKind.APPROVAL,
            title="t",
            action="append",
            args={"word": "w"},
            digest=digest,
            expires_at=time.time() - 1,
        )
    )
    refusals: list[str] = []

    def approve() -> None:
        try:
            inbox.approve(home.store, _cfg(home), item_id)
        except Refused as e:
            refusals.append(str(e))

    store = ApprovesAfterExpiryRead(home.paths.db, approve)
    await store.open()
    try:
        deps = Deps(config=_cfg(home), store=store, models={}, executors={}, sources={}, owner="t")
        await Scheduler(deps, lambda run_id, epoch: None).tick(force=True)
    finally:
        await store.close()
    # Too late to grant (past its expiry, whoever closes it first): the operator is told, the
    # item ends expired, and the scheduler lived to tell.
    assert refusals and "expired" in refusals[0]
    assert approvals(home)[item_id].status == InboxStatus.EXPIRED


async def test_approval_unknown_outcome_is_asked_even_if_killed_before_asking(
    home: Home, serve: Any
) -> None:
    """The journal a kill leaves mid-execution of an approved, non-idempotent action (the approval
    consumed, the intent journaled, no result): the restarted daemon must not re-run it blindly but
    ask the operator (DESIGN.md §4.3) — and recording "unknown" with the question is one commit."""
    write_home(home, [append("go"), FINISH], verify=False)
    run_id = home.start_run(home.add_goal())
    args = {"word": "go"}
    digest = action_digest("append", args)

    def journal(c: Any) -> None:
        # The killed daemon's lease has lapsed: on PostgreSQL another daemon takes the run
        # over only then (on SQLite the restarted daemon takes every running run at start).
        epoch = leases.claim_run(c, run_id, "dead-daemon", LAPSED_LEASE_S)
        snapshot_id = worlds.add_snapshot(c, "default", run_id, {}, {})
        q.append_step(
            c, run_id, epoch, StepKind.OBSERVE, data={"snapshot_id": snapshot_id, "changes": {}}
        )
        q.append_step(c, run_id, epoch, StepKind.DECIDE, action="append", args=args, digest=digest)
        gate: dict[str, Any] = {"action": "append", "args": args, "digest": digest}
        q.append_step(c, run_id, epoch, StepKind.CHECK, verdict=Verdict.APPROVE, **gate)
        item_id = qi.post(c, InboxKind.APPROVAL, title="approve append?", run_id=run_id, **gate)
        qt.suspend(c, run_id, epoch, {"kind": "inbox", "item_id": item_id}, item_id=item_id)
        qi.resolve(c, item_id, InboxStatus.APPROVED, answer="approved")
        why = {
            "woke_by": "inbox",
            "item_id": item_id,
            "item_kind": "approval",
            "status": "approved",
        }
        epoch = qt.wake(c, run_id, "dead-daemon", {**why, **gate}, LAPSED_LEASE_S) or 0
        key = f"{run_id}:{q.get_run(c, run_id).step_count + 1}"
        qi.consume_approval(c, item_id, digest, key)
        data = {"approval": item_id, "key": key}
        q.append_step(c, run_id, epoch, StepKind.ACT, status=StepStatus.STARTED, data=data, **gate)

    home.store.write(journal)
    await serve()
    await wait_for(lambda: home.run(run_id).status != RunStatus.RUNNING)
    questions = [i for i in open_items(home, run_id) if i.kind == InboxKind.QUESTION]
    assert questions, f"the run went on to {home.run(run_id).status} without asking the operator"
    act = next(s for s in home.steps(run_id) if s.kind == StepKind.ACT)
    assert act.status == StepStatus.ERROR and act.result == {
        "ok": False,
        "outcome": "unknown",
        "key": act.data["key"],
    }
