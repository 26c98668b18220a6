"""Property: no execution outside the policy in force (issue 7), under what moves between a
decision and its execution — the config, concurrent runs sharing a rate limit, and the clock.

Each property drives real in-process daemons over real SQLite homes with the scripted model and
checks the side-effect file (one line `KEY word TAG` per execution, TAG naming the argv that ran)
against the journal, the inbox and the config that was in force when the line was written:

1. config changes: the daemon stops at a generated moment (a run waiting for an approval, or a
   journal that ends in a DECIDE, a CHECK or an interrupted intent, as a daemon killed there
   leaves it), the operator may answer while it is down, config.toml is rewritten (menu, policy,
   rate limit, argument pattern, argv, the action removed) and a daemon restarts. Every line was
   allowed by the config of the daemon that wrote it: on the menu, not denied, arguments valid,
   the argv of that config, within its rate limit, and — under `approve` — backed by an approval
   consumed by exactly that execution and bound to that config's definition of the action.
2. concurrent runs sharing `max_per_hour`: never more than the limit; each run refused at
   execution journals a CHECK (`at = execution`, a `rate limit` rule) and leaves a notice.
3. expiries: an approval answered after its `expires_at` never executes (the CLI refuses it; one
   written past the CLI is refused at consumption), and ends `expired` with no ACT step.

Each property failed on the code before issue 7 (see the @example of each); two bugs found on
the way have their own tests after the first property (each failed before its fix).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from agentd import config
from agentd.db import accounting, leases, meta
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.errors import Refused, UsageError
from agentd.harness import policy as harness
from agentd.models import (
    InboxItem,
    InboxKind,
    InboxStatus,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)
from agentd.operator import inbox
from tests.conftest import FreshStore, Home, property_examples, wait_for
from tests.runs.test_approval_property import Daemon  # the in-process daemon that can be killed

# Each property on SQLite and on PostgreSQL (a database per example: `fresh_store_url`).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.backends]
# No deadline (a daemon start varies with the machine's load); no explain phase (it re-runs a
# failing example ~100 times, minutes of daemons, to annotate which draws matter).
SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow],
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
}

WORDS = ("red", "green", "blue")
LAPSED_LEASE_S = -60.0  # a dead daemon's lease, lapsed a minute ago
# Argument patterns a config may give `word`: the second refuses "red" (so a word decided or
# approved under one config can be invalid under the next). "blue" is valid under both.
PATTERNS = ("[a-z]+", "[b-g][a-z]*")

CONFIG = """
[daemon]
poll_interval_s = 0.02
shutdown_grace_s = 5

[api]
safety_scan_s = 0.5  # a poke lost to a kill is noticed soon (as in test_approval_property)

[models.default]
provider = "scripted"
replies = "replies.json"
__APPEND__
[agents.default]
actions = [__ACTIONS__]
policy = { default = "__DEFAULT__", rules = { __RULES__ }, max_per_hour = { __LIMITS__ }__EXPIRE__ }
limits = { loop_threshold = 100, max_denials = 100, max_invalid_outputs = 10, max_steps = 60 }
"""

APPEND = """
[actions.append]
type = "command"
# TAG names this definition: a line written by another argv than the one in force shows.
# The sleep widens the window in which concurrent runs race for a rate limit.
argv = ["sh", "-c", "echo \\"$AGENTD_IDEMPOTENCY_KEY {word} __TAG__\\" >> '__OUT__'; sleep 0.02"]
params = { word = { pattern = "__PATTERN__" } }
idempotent = __IDEMPOTENT__
verify_argv = ["sh", "-c", "test -e '__OUT__' || { echo not-done; exit 0; }; grep -q \\"^$AGENTD_IDEMPOTENCY_KEY \\" '__OUT__' && echo done || echo not-done"]
"""  # noqa: E501  (the verify command is one TOML string)


@dataclass(frozen=True)
class PolicySpec:
    """What config.toml says about `append` for one daemon's lifetime."""

    on_menu: bool = True
    defined: bool = True  # [actions.append] exists (it may be defined and not on the menu)
    verdict: str = "allow"  # allow | approve | deny
    by_default: bool = False  # given as the policy's default rather than a rule for append
    limit: int | None = None  # max_per_hour
    tag: str = "v1"  # which argv
    pattern: str = PATTERNS[0]
    expire_s: float | None = None  # approvals expire after this (on_expire = deny)

    def toml(self, out: Path, idempotent: bool) -> str:
        named = self.on_menu and not self.by_default  # a rule may only name a menu action
        expire = (
            f', expire = {{ approval = {{ after_s = {self.expire_s}, on_expire = "deny" }} }}'
            if self.expire_s is not None
            else ""
        )
        return (
            CONFIG.replace("__APPEND__", APPEND if self.defined or self.on_menu else "")
            .replace("__OUT__", str(out))
            .replace("__TAG__", self.tag)
            .replace("__PATTERN__", self.pattern)
            .replace("__IDEMPOTENT__", "true" if idempotent else "false")
            .replace("__ACTIONS__", '"append", "finish"' if self.on_menu else '"finish"')
            .replace("__DEFAULT__", self.verdict if self.by_default else "allow")
            .replace("__RULES__", f'append = "{self.verdict}"' if named else "")
            .replace(
                "__LIMITS__",
                f"append = {self.limit}" if self.on_menu and self.limit is not None else "",
            )
            .replace("__EXPIRE__", expire)
        )

    def valid(self, word: str) -> bool:
        return re.fullmatch(self.pattern, word) is not None

    def check_verdict(self) -> tuple[Verdict, str]:
        """What harness.check says about a decided `append` with no execution yet this hour."""
        if not self.on_menu:
            return Verdict.DENY, "append is not on this agent's menu"
        if self.verdict == "deny":
            return Verdict.DENY, "policy: append = deny"
        if self.limit == 0:
            return Verdict.DENY, "rate limit: append ran 0 times in the last hour (max 0)"
        return Verdict(self.verdict), f"policy: append = {self.verdict}"


def write_home(home: Home, spec: PolicySpec, replies: list[Any], idempotent: bool) -> Path:
    out = home.root.parent / "out.txt"
    home.write_config(spec.toml(out, idempotent), replies)
    return out


def append(word: str) -> dict[str, Any]:
    return {"reason": f"append {word}", "action": {"kind": "append", "word": word}}


FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


@dataclass(frozen=True)
class Line:
    """One execution as the side-effect file shows it."""

    key: str
    word: str
    tag: str


def executed(out: Path) -> list[Line]:
    if not out.exists():
        return []
    return [Line(*line.split(" ")) for line in out.read_text().splitlines()]


@dataclass(frozen=True)
class Approval:
    """An approval row as stored, with the columns InboxItem leaves out."""

    item_id: int
    status: str
    args: dict[str, Any]
    digest: str
    consumed_by: str | None
    data: dict[str, Any]
    resolved_at: float | None
    expires_at: float | None


def approvals(home: Home, run_id: int | None = None) -> dict[int, Approval]:
    # `? IS NULL` would leave PostgreSQL no type for the parameter: two statements instead
    sql = (
        "SELECT item_id, status, args, digest, consumed_by, data, resolved_at, expires_at"
        " FROM inbox WHERE kind = 'approval'"
    )
    if run_id is None:
        rows = home.store.read(lambda c: c.execute(f"{sql} ORDER BY item_id").fetchall())
    else:
        rows = home.store.read(
            lambda c: c.execute(f"{sql} AND run_id = ? ORDER BY item_id", (run_id,)).fetchall()
        )
    return {
        r[0]: Approval(r[0], r[1], json.loads(r[2]), r[3], r[4], json.loads(r[5]), r[6], r[7])
        for r in rows
    }


def all_items(home: Home, run_id: int | None = None) -> list[InboxItem]:
    return home.store.read(lambda c: qi.list_items(c, status=None, run_id=run_id))


def append_acts(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s.kind == StepKind.ACT and s.action == "append"]


@contextlib.asynccontextmanager
async def running(home: Home) -> Any:
    d = await Daemon(home).start()
    try:
        yield d
    finally:
        if d.task is not None and not d.task.done():
            await d.shutdown()


async def settle(home: Home, run_id: int, d: Daemon, timeout_s: float = 15.0) -> InboxItem | None:
    """Wait (bounded) until the run finished (None) or waits on an open inbox item (that item)."""
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


@contextlib.contextmanager
def fresh_home(fresh_store_url: FreshStore) -> Iterator[Home]:
    """A home per example (hypothesis runs many examples on one function-scoped fixture), with
    a store of its own."""
    with tempfile.TemporaryDirectory(prefix="agentd-policy-") as tmp, fresh_store_url() as url:
        home = Home(Path(tmp) / "home", url)
        try:
            yield home
        finally:
            home.close()


# ═════ 1. config changes between decision and execution ═════════════════════════════════════════


@st.composite
def policies(
    draw: st.DrawFn,
    *,
    on_menu: bool | None = None,
    verdicts: tuple[str, ...] = ("allow", "approve", "approve", "deny"),
    limits: tuple[int | None, ...] = (None, None, 0, 1, 2),
    tags: tuple[str, ...] = ("v1", "v2"),
    undefined: bool = False,
) -> PolicySpec:
    on = draw(st.sampled_from((True, True, False))) if on_menu is None else on_menu
    return PolicySpec(
        on_menu=on,
        defined=on or not undefined or draw(st.booleans()),
        verdict=draw(st.sampled_from(verdicts)),
        by_default=draw(st.booleans()),
        limit=draw(st.sampled_from(limits)) if on else None,
        tag=draw(st.sampled_from(tags)),
        pattern=draw(st.sampled_from(PATTERNS)),
    )


OPS = st.sampled_from(("approve", "approve", "edit", "deny"))
# Where the first daemon stops: with the run waiting for an approval (a real daemon), or — as a
# daemon killed at that point leaves it — a journal ending in a parsed DECIDE, in a CHECK, or in
# an intent (ACT started, approval consumed) with no result.
MOMENTS = ("waiting", "waiting", "decided", "checked", "intent")


@dataclass(frozen=True)
class Change:
    """One generated config change: where the daemon stops, what the operator does while it is
    down, and what the config says before and after."""

    moment: str
    before: PolicySpec
    after: PolicySpec
    idempotent: bool
    first: str  # the word of the decision that straddles the change
    then: tuple[str, ...]  # the words of the decisions after it
    down_op: str  # waiting: approve | edit | deny | none, while no daemon runs
    rewrite_first: bool  # waiting: config.toml rewritten before the operator answers
    effect_done: bool  # intent: the line was written before the daemon died
    plan: tuple[str, ...]  # answers to the approvals asked after the restart (then: approve)


@st.composite
def changes(draw: st.DrawFn) -> Change:
    moment = draw(st.sampled_from(MOMENTS))
    if moment == "waiting":  # the run only waits for an approval if the first config asks one
        before = draw(policies(on_menu=True, verdicts=("approve",), limits=(None, 1), tags=("v1",)))
    elif moment == "intent":  # the first config admitted it: the intent was journaled
        before = draw(
            policies(on_menu=True, verdicts=("allow", "approve"), limits=(None, 1), tags=("v1",))
        )
    else:  # decided, checked: the model chose it from the first config's menu
        before = draw(policies(on_menu=True, tags=("v1",)))
    first = draw(st.sampled_from(WORDS))
    return Change(
        moment=moment,
        before=before,
        after=draw(policies(undefined=True)),
        idempotent=draw(st.booleans()),
        first=first if before.valid(first) else "blue",  # it was decided under `before`
        then=tuple(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))),
        down_op=draw(st.sampled_from(("approve", "approve", "edit", "deny", "none"))),
        rewrite_first=draw(st.booleans()),
        effect_done=draw(st.booleans()),
        plan=tuple(draw(st.lists(OPS, max_size=3))),
    )


@dataclass
class Operator:
    """What the operator did."""

    denied: set[int] = field(default_factory=set)
    questions: list[str] = field(default_factory=list)


def respond(home: Home, cfg: config.Config, item: InboxItem, op: str, who: Operator) -> None:
    """Answer one inbox item through agentd.operator.inbox, the operator's path."""
    if item.kind == InboxKind.QUESTION:
        who.questions.append(item.title)
        inbox.answer(home.store, item.item_id, "carry on")
        return
    if op == "none":
        return
    word = (item.args or {})["word"]
    if op == "deny":
        inbox.deny(home.store, item.item_id, reason="not that")
        who.denied.add(item.item_id)
        return
    if op == "edit":
        edited = WORDS[(WORDS.index(word) + 1) % len(WORDS)]
        with contextlib.suppress(UsageError):  # invalid under this config: approve it as asked
            inbox.approve(home.store, cfg, item.item_id, edit={"word": edited})
            return
    inbox.approve(home.store, cfg, item.item_id)


def journal_prefix(c: Any, run_id: int, epoch: int, word: str, check: PolicySpec | None) -> None:
    """OBSERVE, DECIDE (and the CHECK `check` gives) of `append word`, as a daemon under an older
    config journaled them."""
    args, digest = {"word": word}, action_digest("append", {"word": word})
    raw = json.dumps(append(word))
    q.append_step(c, run_id, epoch, StepKind.OBSERVE, data={"changes": {}})
    q.append_step(c, run_id, epoch, StepKind.DECIDE, action="append", args=args, digest=digest,
                  data={"reason": f"append {word}", "raw": raw, "decision_no": 1})  # fmt: skip
    if check is not None:
        verdict, rule = check.check_verdict()
        q.append_step(c, run_id, epoch, StepKind.CHECK, action="append", args=args, digest=digest,
                      verdict=verdict, data={"rule": rule, "escalate": False})  # fmt: skip


def rate_limits_of(home: Home) -> list[tuple[str, str]]:
    """The (agent, action) pairs the config on disk limits — what a daemon registers at start."""
    cfg = config.load(home.paths.config)
    return [(a, act) for a, agent in cfg.agents.items() for act in agent.policy.max_per_hour]


def journal_checked(home: Home, ch: Change) -> int:
    """A run whose journal ends with the DECIDE, or the CHECK, the first config gave."""
    run_id = home.start_run(home.add_goal())
    limited = rate_limits_of(home)
    check = ch.before if ch.moment == "checked" else None

    def work(c: Any) -> None:
        accounting.set_rate_limits(c, limited)  # what the dead daemon had registered
        journal_prefix(c, run_id, 0, ch.first, check)

    home.store.write(work)
    return run_id


def journal_intent(home: Home, ch: Change, out: Path) -> int:
    """A run whose journal ends with the intent of `append` admitted under the first config (its
    approval consumed, if it needed one) and no result: the daemon died during the execution,
    after writing the line (`effect_done`) or before."""
    run_id = home.start_run(home.add_goal())
    cfg = config.load(home.paths.config)
    bound = harness.config_hash(cfg.action("append"))
    args, digest = {"word": ch.first}, action_digest("append", {"word": ch.first})
    gate: dict[str, Any] = {"action": "append", "args": args, "digest": digest}
    limited = rate_limits_of(home)
    approved = ch.before.check_verdict()[0] == Verdict.APPROVE

    def work(c: Any) -> str:
        accounting.set_rate_limits(c, limited)
        # The dead daemon's lease has lapsed: on PostgreSQL a daemon takes the run only then.
        epoch = leases.claim_run(c, run_id, "dead-daemon", LAPSED_LEASE_S)
        journal_prefix(c, run_id, epoch, ch.first, ch.before)
        item_id = None
        if approved:
            item_id = qi.post(c, InboxKind.APPROVAL, title="approve append?", run_id=run_id,
                              data={"config_hash": bound}, **gate)  # fmt: skip
            wait = {"kind": "inbox", "item_id": item_id, "why": "approval", "action": "append"}
            qt.suspend(c, run_id, epoch, wait, item_id=item_id)
            qi.resolve(c, item_id, InboxStatus.APPROVED, answer="approved")
            why = {"woke_by": "inbox", "why": "approval", "item_id": item_id,
                   "item_kind": "approval", "status": "approved", **gate}  # fmt: skip
            epoch = qt.wake(c, run_id, "dead-daemon", why, LAPSED_LEASE_S) or 0
        key = f"{meta.db_id(c)}:{run_id}:{len(q.list_steps(c, run_id)) + 1}"
        if item_id is not None:
            qi.consume_approval(c, item_id, digest, key)
        data = {"approval": item_id, "key": key, "config": bound}
        q.append_step(c, run_id, epoch, StepKind.ACT, status=StepStatus.STARTED, data=data, **gate)
        return key

    key = home.store.write(work)
    if ch.effect_done:
        with out.open("a") as f:
            f.write(f"{key} {ch.first} {ch.before.tag}\n")
    return run_id


@dataclass
class Trace:
    """What happened in one example, to hold the outcome against."""

    run_id: int = 0
    first_lines: int = 0  # lines written before the restart: under the first config
    asked_before: set[int] = field(default_factory=set)  # approvals asked under the first config
    configs: dict[str, config.Config] = field(default_factory=dict)  # "before" / "after"
    who: Operator = field(default_factory=Operator)


def rewrite(home: Home, when: str, replies: list[Any], ch: Change, t: Trace) -> None:
    """Write config.toml `before` or `after` the change, as the operator would."""
    write_home(home, ch.before if when == "before" else ch.after, replies, ch.idempotent)
    t.configs[when] = config.load(home.paths.config)


async def drive_change(home: Home, ch: Change, out: Path) -> Trace:
    replies = [append(ch.first), *map(append, ch.then), FINISH]
    t = Trace()
    rewrite(home, "before", replies, ch, t)
    if ch.moment == "waiting":
        run_id = home.start_run(home.add_goal())
        async with running(home) as d:
            item = await settle(home, run_id, d)
        assert item is not None and item.kind == InboxKind.APPROVAL, item
        if ch.rewrite_first:
            rewrite(home, "after", replies, ch, t)
        respond(home, config.load(home.paths.config), item, ch.down_op, t.who)
    elif ch.moment == "intent":
        run_id = journal_intent(home, ch, out)
    else:
        run_id = journal_checked(home, ch)
    t.run_id, t.first_lines = run_id, len(executed(out))
    t.asked_before = set(approvals(home, run_id))
    rewrite(home, "after", replies, ch, t)
    plan = list(ch.plan)
    async with running(home) as d:
        for _ in range(30):
            item = await settle(home, run_id, d)
            if item is None:
                return t
            respond(home, t.configs["after"], item, plan.pop(0) if plan else "approve", t.who)
    raise AssertionError("the run did not finish within 30 operator answers")


def assert_in_force(
    home: Home,
    run_id: int,
    line: Line,
    spec: PolicySpec,
    cfg: config.Config,
    before: list[tuple[Line, PolicySpec]],
    asked_under: dict[int, PolicySpec],
) -> None:
    """One execution, held against the config of the daemon that ran it; `before` are the
    executions before it (all within this hour), each with the config that ran it;
    `asked_under` the config each approval was asked under (whose argv the operator saw)."""
    (act,) = [s for s in append_acts(home.steps(run_id)) if s.data["key"] == line.key]
    assert act.args == {"word": line.word}
    assert spec.on_menu, f"{line} ran while append was not on the menu"
    assert spec.verdict != "deny", f"{line} ran under append = deny"
    assert spec.valid(line.word), f"{line} ran with a word {spec.pattern!r} refuses"
    assert line.tag == spec.tag, f"{line} ran the argv of {line.tag}, not the one in force"
    if spec.limit is not None:
        # Counted: executions made while append had a limit. Those made before any limit was
        # configured are not (test_rate_limit_added_by_a_config_change_counts_the_hour_before).
        earlier = {b.key for b, by in before if by.limit is not None} - {line.key}
        assert len(earlier) < spec.limit, f"{line} ran after {len(earlier)} (max {spec.limit})"
    if spec.verdict == "approve":
        approval = act.data["approval"]
        assert approval is not None, f"{line} ran under append = approve without an approval"
        a = approvals(home, run_id)[approval]
        assert (a.status, a.consumed_by) == (InboxStatus.CONSUMED, line.key)
        assert a.args == {"word": line.word}
        assert a.digest == action_digest("append", {"word": line.word})
        assert asked_under[approval].tag == line.tag, f"{line} ran another argv than approved"
        assert a.data["config_hash"] == harness.config_hash(cfg.action("append")), (
            f"{line} ran on an approval of another definition of append"
        )


def check_change(home: Home, out: Path, ch: Change, t: Trace) -> None:
    run_id, who = t.run_id, t.who
    ran = [
        (line, "before" if i < t.first_lines else "after") for i, line in enumerate(executed(out))
    ]
    specs = {"before": ch.before, "after": ch.after}
    asked_under = {
        i: ch.before if i in t.asked_before else ch.after for i in approvals(home, run_id)
    }
    for i, (line, when) in enumerate(ran):
        earlier = [(b, specs[w]) for b, w in ran[:i]]
        assert_in_force(home, run_id, line, specs[when], t.configs[when], earlier, asked_under)
    keys = Counter(line.key for line, _ in ran)
    # A key is written twice only by an idempotent intent written before the crash and re-run.
    assert all(n == 1 or ch.idempotent for n in keys.values()), ran
    # Nothing the operator denied ran; every approval that did not run is closed, not granted.
    steps = home.steps(run_id)
    used = {s.data["approval"] for s in append_acts(steps)}
    for a in approvals(home, run_id).values():
        if a.item_id in who.denied:
            assert a.status == InboxStatus.DENIED and a.item_id not in used
        if a.item_id not in used:
            assert a.status in (InboxStatus.DENIED, InboxStatus.EXPIRED), a
    if ch.after.defined:  # a config change is not an internal error (see the test below)
        assert not [title for title in who.questions if "internal error" in title], who.questions
    assert home.run(run_id).status == RunStatus.SUCCEEDED
    for s in steps:
        if s.kind == StepKind.CHECK and s.data.get("at") == "execution":
            event(f"refused at execution: {re.sub(r'[0-9]+', 'N', s.data['rule'])[:60]}")
    event(
        f"{ch.moment}: executed before/after the change {t.first_lines}/{len(ran) - t.first_lines}"
    )


# The old bugs, always tried: approved, then tightened to deny / re-pointed to another argv
# while the daemon was down, the approval still ran (nothing was checked at execution).
APPROVED_THEN_DENIED = Change(
    "waiting", PolicySpec(verdict="approve"), PolicySpec(verdict="deny"), False, "red", ("blue",),
    "approve", False, False, (),
)  # fmt: skip
APPROVED_THEN_REPOINTED = Change(
    "waiting", PolicySpec(verdict="approve"), PolicySpec(verdict="approve", tag="v2"), False,
    "red", ("blue",), "approve", False, False, (),
)  # fmt: skip


def test_policy_property_config_change_never_runs_outside_the_config_in_force(
    backend: str, fresh_store_url: FreshStore
) -> None:
    # The property is built here, its example count by engine (tests/conftest.py).
    @settings(max_examples=property_examples(backend, 25), **SETTINGS)
    @example(ch=APPROVED_THEN_DENIED)
    @example(ch=APPROVED_THEN_REPOINTED)
    @given(ch=changes())
    def config_change(ch: Change) -> None:
        with fresh_home(fresh_store_url) as home:
            out = home.root.parent / "out.txt"
            trace = asyncio.run(drive_change(home, ch, out))
            check_change(home, out, ch, trace)

    config_change()


# ── found on the way (fixed: each failed before) ──────────────────────────────────────────────────────


def test_rate_limit_added_by_a_config_change_counts_the_hour_before(
    fresh_store_url: FreshStore,
) -> None:
    """max_per_hour counts the executions in the last hour, not those since the limit was set:
    rate_log only logs actions that had a limit when the daemon started."""
    with fresh_home(fresh_store_url) as home:
        replies = [append("red"), FINISH]
        out = write_home(home, PolicySpec(limit=None), replies, idempotent=False)

        async def two_runs() -> None:
            for spec in (PolicySpec(limit=None), PolicySpec(limit=1)):
                write_home(home, spec, replies, idempotent=False)
                run_id = home.start_run(home.add_goal())
                async with running(home) as d:
                    assert await settle(home, run_id, d) is None

        asyncio.run(two_runs())
        assert len(executed(out)) == 1, "append ran twice within the hour under max_per_hour 1"


@pytest.mark.parametrize("moment", ["decided", "checked"])
def test_config_change_removing_an_action_is_not_an_internal_error(
    moment: str, fresh_store_url: FreshStore
) -> None:
    """A run whose journal ends in a DECIDE or a CHECK (approve) of `append`, restarted under a
    config without [actions.append], parks on "stopped on an internal error" (a pydantic
    ValidationError from Config.action in RunDriver.check / request_approval)."""
    ch = Change(moment, PolicySpec(verdict="approve"), PolicySpec(on_menu=False, defined=False),
                False, "red", (), "none", False, False, ())  # fmt: skip
    with fresh_home(fresh_store_url) as home:
        trace = asyncio.run(drive_change(home, ch, home.root.parent / "out.txt"))
        internal = [title for title in trace.who.questions if "internal error" in title]
        assert not internal, internal


# ═════ 2. concurrent runs sharing a rate limit ══════════════════════════════════════════════════


async def park_all(home: Home, runs: list[int], d: Daemon) -> list[InboxItem]:
    """Every run finished or waiting on an open item: those items."""
    items = [await settle(home, run_id, d) for run_id in runs]
    return [i for i in items if i is not None]


async def drive_rate(home: Home, runs: list[int], grant_while_down: bool) -> None:
    cfg = config.load(home.paths.config)
    d = await Daemon(home).start()
    try:
        for _ in range(20):
            items = await park_all(home, runs, d)
            if not items:
                return
            if grant_while_down:  # granted together: the restart wakes them in one tick
                await d.shutdown()
            for item in items:  # approve all at once
                inbox.approve(home.store, cfg, item.item_id)
            if grant_while_down:
                d = await Daemon(home).start()
        raise AssertionError("runs still waiting after 20 rounds of approvals")
    finally:
        if d.task is not None and not d.task.done():
            await d.shutdown()


def check_rate(home: Home, runs: list[int], out: Path, limit: int) -> None:
    lines = executed(out)
    keys = {line.key for line in lines}
    assert len(keys) == len(lines), lines  # no crash here: each execution once
    assert len(keys) <= limit, f"{len(keys)} executions within the hour, max_per_hour {limit}"
    acts = [s for r in runs for s in append_acts(home.steps(r))]
    assert {s.data["key"] for s in acts} == keys  # each journaled intent ran, nothing else did
    refusals = 0
    for run_id in runs:
        steps = home.steps(run_id)
        at_execution = [s for s in steps if s.kind == StepKind.CHECK and s.data.get("at")]
        for prev, s in itertools.pairwise(steps):
            # What was admitted at decision time or approved is acted on, or refused visibly.
            allowed = prev.kind == StepKind.CHECK and prev.verdict == Verdict.ALLOW
            approved = prev.kind == StepKind.WAKE and prev.data.get("status") == "approved"
            if (allowed and prev.action == "append") or approved:
                assert s.kind == StepKind.ACT or s in at_execution, (prev, s)
        for s in at_execution:
            assert s.data["at"] == "execution" and s.verdict == Verdict.DENY
            assert s.data["rule"].startswith("rate limit"), s.data
        # One notice per refusal at execution.
        notices = [i for i in all_items(home, run_id) if "refused at execution" in i.title]
        assert len(notices) == len(at_execution), (notices, at_execution)
        refusals += len(at_execution)
        for a in approvals(home, run_id).values():
            assert a.status in (InboxStatus.CONSUMED, InboxStatus.EXPIRED), a
            assert (a.status == InboxStatus.CONSUMED) == (a.consumed_by in keys)
        assert home.run(run_id).status == RunStatus.SUCCEEDED
    decided_over = any(
        s.kind == StepKind.CHECK and str(s.data.get("rule", "")).startswith("rate limit")
        for r in runs
        for s in home.steps(r)
    )
    if decided_over:  # a refusal means the limit was reached, not that a reservation leaked
        assert len(keys) == limit
    event(f"refused at execution: {'some' if refusals else 'none'}")


def test_policy_property_concurrent_runs_share_a_rate_limit(
    backend: str, fresh_store_url: FreshStore
) -> None:
    @settings(max_examples=property_examples(backend, 20), **SETTINGS)
    @given(
        n_runs=st.integers(2, 6),
        limit=st.integers(1, 3),
        appends=st.integers(1, 2),
        idempotent=st.booleans(),
        verdict=st.sampled_from(("allow", "approve")),
        grant_while_down=st.booleans(),
    )
    # The old bug, always tried: counted at CHECK, logged once the command ended — all ran.
    @example(n_runs=4, limit=1, appends=1, idempotent=True, verdict="allow", grant_while_down=False)
    @example(
        n_runs=3, limit=2, appends=1, idempotent=False, verdict="approve", grant_while_down=True
    )
    def rate_limit(
        n_runs: int,
        limit: int,
        appends: int,
        idempotent: bool,
        verdict: str,
        grant_while_down: bool,
    ) -> None:
        with fresh_home(fresh_store_url) as home:
            spec = PolicySpec(verdict=verdict, limit=limit)
            out = write_home(home, spec, [*[append("x")] * appends, FINISH], idempotent)
            runs = [home.start_run(home.add_goal(title=f"goal {i}")) for i in range(n_runs)]
            asyncio.run(drive_rate(home, runs, grant_while_down and verdict == "approve"))
            check_rate(home, runs, out, limit)

    rate_limit()


# ═════ 3. expiries ═════════════════════════════════════════════════════════════════════════════


@dataclass(frozen=True)
class Answer:
    """The operator's answer to one approval: what, when (a fraction of the expiry time after it
    was asked; above 1 is too late), and whether the daemon is down meanwhile. `sneak` approves
    straight in the inbox table, as an older CLI (or a hand-written UPDATE) would."""

    op: str  # approve | edit | deny | sneak | none
    at: float
    down: bool


ANSWERS = st.builds(
    Answer,
    st.sampled_from(("approve", "approve", "edit", "deny", "sneak", "none")),
    st.sampled_from((0.0, 0.5, 1.3)),
    st.booleans(),
)


@dataclass
class Answered:
    """One answer as given: to which item, when, and whether it was refused."""

    item_id: int
    op: str
    called_at: float  # just before the call
    returned_at: float  # just after
    expires_at: float
    refused: bool
    down: bool


async def answer_at(home: Home, cfg: config.Config, item: InboxItem, a: Answer) -> Answered:
    expires_at = item.expires_at.timestamp() if item.expires_at else float("inf")
    asked_at = item.created_at.timestamp()
    await asyncio.sleep(max(0.0, asked_at + a.at * (expires_at - asked_at) - time.time()))
    called_at, refused = time.time(), False
    try:
        if a.op == "approve":
            inbox.approve(home.store, cfg, item.item_id)
        elif a.op == "edit":
            inbox.approve(home.store, cfg, item.item_id, edit={"word": "green"})
        elif a.op == "deny":
            inbox.deny(home.store, item.item_id)
        elif a.op == "sneak":
            home.store.write(
                lambda c: qi.resolve(c, item.item_id, InboxStatus.APPROVED, answer="ok")
            )
    except Refused:
        refused = True
    return Answered(item.item_id, a.op, called_at, time.time(), expires_at, refused, a.down)


def closed(home: Home, item_id: int) -> bool:
    return home.store.read(lambda c: qi.get_item(c, item_id)).status != InboxStatus.OPEN


async def drive_expiry(home: Home, run_id: int, plan: list[Answer]) -> list[Answered]:
    cfg = config.load(home.paths.config)
    log: list[Answered] = []
    d = await Daemon(home).start()
    try:
        for _ in range(10):
            item = await settle(home, run_id, d)
            if item is None:
                return log
            assert item.kind == InboxKind.APPROVAL, item.title
            a = plan.pop(0) if plan else Answer("approve", 0.0, down=False)
            if a.down:
                await d.shutdown()
            answered = await answer_at(home, cfg, item, a)
            log.append(answered)
            if a.down:
                d = await Daemon(home).start()
            if a.op == "none" or answered.refused:
                # Unanswered, or refused as too late (the driver was slow: a loaded machine):
                # the daemon closes it as it expires. The next answer is for the run's next
                # approval, never a second one to this item, which its check would not expect.
                await wait_for(functools.partial(closed, home, item.item_id))
        raise AssertionError("the run did not finish after 10 approvals")
    finally:
        if d.task is not None and not d.task.done():
            await d.shutdown()


def check_expiry(home: Home, run_id: int, out: Path, log: list[Answered]) -> None:
    lines = executed(out)
    items = approvals(home, run_id)
    acts = append_acts(home.steps(run_id))
    by_approval = {s.data["approval"]: s for s in acts}
    assert len(lines) == len(acts) == len(by_approval)
    # Every execution used an approval granted before it expired, consumed by exactly it.
    for s in acts:
        a = items[s.data["approval"]]
        assert a.status == InboxStatus.CONSUMED and a.consumed_by == s.data["key"]
        assert a.expires_at is not None and a.resolved_at is not None
        assert a.resolved_at <= a.expires_at, f"approval {a.item_id} granted after it expired"
    for ans in log:
        a = items[ans.item_id]
        granting = ans.op in ("approve", "edit")
        if granting and ans.called_at >= ans.expires_at:  # too late: the CLI refuses
            assert ans.refused, (
                f"approval {a.item_id} granted {ans.called_at - ans.expires_at}s late"
            )
        if granting and ans.returned_at < ans.expires_at:  # in time: granted and run
            assert not ans.refused and a.status == InboxStatus.CONSUMED
        late = a.resolved_at is None or a.expires_at is None or a.resolved_at > a.expires_at
        if late and ans.op != "deny":
            # expired unanswered, or granted late (past the CLI): never executed, closed expired
            assert a.status == InboxStatus.EXPIRED and a.item_id not in by_approval, a
        when = (
            "" if ans.op == "none" else " late" if ans.called_at >= ans.expires_at else " in time"
        )
        refused = " (refused)" if ans.refused else ""
        event(f"{ans.op}{when}{refused}, daemon {'down' if ans.down else 'up'} → {a.status}")
    for a in items.values():  # whatever did not execute is closed, never left granted
        if a.item_id not in by_approval:
            assert a.status in (InboxStatus.EXPIRED, InboxStatus.DENIED), a
    assert home.run(run_id).status == RunStatus.SUCCEEDED


def test_policy_property_approval_answered_after_expiry_never_executes(
    backend: str, fresh_store_url: FreshStore
) -> None:
    @settings(max_examples=property_examples(backend, 20), **SETTINGS)
    @given(
        expire_s=st.sampled_from((0.2, 0.3, 0.5, 1.0)),
        appends=st.integers(1, 2),
        plan=st.lists(ANSWERS, min_size=1, max_size=2),
    )
    # The old bugs, always tried: granted past its expiry while the daemon was down (by the CLI,
    # or straight in the table), the approval was woken on and ran.
    @example(expire_s=0.2, appends=1, plan=[Answer("approve", 1.3, down=True)])
    @example(expire_s=0.2, appends=1, plan=[Answer("sneak", 1.3, down=True)])
    def expiry(expire_s: float, appends: int, plan: list[Answer]) -> None:
        with fresh_home(fresh_store_url) as home:
            spec = PolicySpec(verdict="approve", expire_s=expire_s)
            out = write_home(home, spec, [*[append("red")] * appends, FINISH], idempotent=False)
            run_id = home.start_run(home.add_goal())
            log = asyncio.run(drive_expiry(home, run_id, list(plan)))
            check_expiry(home, run_id, out, log)

    expiry()
