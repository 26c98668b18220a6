"""Several daemons on one database (issue 21): the work only one of them may do at a time, each
shown with two stores on one database — a SQLite file, and a PostgreSQL database from pg_url.

- Singletons (retention, rate-limit bookkeeping, inbox expiry, the notify queue's expansion) lock
  their row of `agentd_locks` at the start of their write transaction on PostgreSQL: a second daemon's
  transaction waits for the first to commit, then finds the work done or the budget spent.
  SQLite's BEGIN IMMEDIATE serialises writers already: the same outcomes, with no lock to see.
- Check-ins and outbox messages are claimed (SKIP LOCKED on PostgreSQL): two claimers get
  disjoint rows, a claim is renewed only by its owner, and a claim that lapsed on the database's
  clock is taken over.

Concurrency is real: a transaction is held open on one store while another store's thread runs
into it; the tests wait on conditions (the lock wait PostgreSQL shows in pg_locks), never sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.daemon.scheduler import Scheduler
from agentd.db import accounting, leases, meta, outbox
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.backend import Backend
from agentd.db.conn import Conn
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus, StepKind, StepStatus
from agentd.notify.plan import plan_queued
from agentd.runs.deps import Deps

BackendAt = Callable[[Path], Backend]
NOW = 1_000_000.0
WAIT_S = 20.0


@pytest.fixture
def stores(tmp_path: Path, backend_at: BackendAt) -> Iterator[tuple[SyncStore, SyncStore]]:
    """Two stores on the test's one database, as two daemons would hold them."""
    path = tmp_path / "agentd.db"
    a = SyncStore(path, backend=backend_at(path))
    a.write(lambda c: None)  # migrated before the second one opens
    b = SyncStore(path, backend=backend_at(path))
    yield a, b
    a.close()
    b.close()


def until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
    return got


class Background:
    """`store.write(work)` on a thread of its own: its result, or what it raised."""

    def __init__(self, store: SyncStore, work: Callable[[Conn], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(store, work), daemon=True)
        self.thread.start()

    def _run(self, store: SyncStore, work: Callable[[Conn], Any]) -> None:
        try:
            self.result = store.write(work)
        except BaseException as e:
            self.error = e

    def join(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the second transaction never finished"
        if self.error is not None:
            raise self.error
        return self.result


def waiting_for(store: SyncStore, name: str) -> bool:
    """Whether a transaction waits for a singleton's row in `agentd_locks`: for the row's lock
    or for the transaction that holds it (pg_locks; pg_stat_activity is a snapshot inside the
    transaction that reads it). The tests hold one singleton at a time: `name` is that one."""
    row = store.read(
        lambda c: c.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted"
            " AND locktype IN ('transactionid', 'tuple')"
        ).fetchone()
    )
    return int(row[0]) > 0


@contextmanager
def first_holds(store: SyncStore, work: Callable[[Conn], Any]) -> Iterator[Any]:
    """Run `work` in a transaction of `store` left open (and so its locks held) until the block
    ends, then commit it."""
    with store.transaction() as c:
        yield work(c)


def second_waits(first: SyncStore, second: SyncStore, name: str, work: Callable[[Conn], Any],
                 work2: Callable[[Conn], Any] | None = None) -> tuple[Any, Any]:  # fmt: skip
    """The first store does `work` in an open transaction; the second's (`work2`, else the same)
    starts meanwhile and, on PostgreSQL, is seen waiting for the singleton `name` until the first
    commits. SQLite's second writer waits in BEGIN IMMEDIATE, which shows no lock to look at."""
    with first_holds(first, work) as one:
        other = Background(second, work2 or work)
        if first.backend.dialect.engine == "postgres":
            until(f"the second transaction to wait for {name!r}", lambda: waiting_for(first, name))
            assert other.thread.is_alive()
    return one, other.join()


# ── singletons ───────────────────────────────────────────────────────────────────────────────────


def _goal_run(c: Conn, agent: str = "a") -> tuple[int, int, int]:
    goal = q.add_goal(c, title="t", why="t", agent=agent, criteria=[], deadline=None)
    run = q.create_run(c, goal_id=goal, agent=agent, trigger="t")
    return goal, run, leases.claim_run(c, run, "me", 60)


@pytest.mark.backends
def test_retention_prunes_one_daemon_at_a_time(stores: tuple[SyncStore, SyncStore]) -> None:
    a, b = stores

    def arrange(c: Conn) -> None:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        for n in range(3):
            qi.post(c, InboxKind.NOTICE, title=f"old {n}", goal_id=goal)
        c.execute("UPDATE inbox SET status = 'dismissed', resolved_at = 1000")
        outbox.add(c, key="k", channel="ops", item_id=None, goal_id=None, stage=0,
                   message={}, due_at=1.0, now=1.0)  # fmt: skip
        c.execute("UPDATE outbox SET status = 'sent'")

    a.write(arrange)
    prune = lambda c: meta.prune(c, older_than=2000)  # noqa: E731
    assert second_waits(a, b, "retention", prune) == (3, 0)  # the second finds the work done
    drop = lambda c: outbox.prune(c, older_than=2000)  # noqa: E731
    assert second_waits(a, b, "retention", drop) == (1, 0)


RATE = 1  # executions of ("a", "deploy") allowed an hour


def _spend(c: Conn, run: int, epoch: int, count: Callable[..., int]) -> bool:
    """One intent as acting.py admits it: count the hour's executions, and journal the ACT step
    (the rate log's entry) only under the limit. True when it was spent."""
    if count(c, "a", "deploy", NOW - 3600) >= RATE:
        return False
    q.append_step(c, run, epoch, StepKind.ACT, status=StepStatus.STARTED, action="deploy",
                  args={}, digest="d", data={})  # fmt: skip
    return True


@pytest.mark.backends
def test_a_rate_limit_is_never_spent_twice_by_two_daemons(
    stores: tuple[SyncStore, SyncStore],
) -> None:
    a, b = stores
    a.write(lambda c: accounting.set_rate_limits(c, [("a", "deploy")]))
    _, run1, epoch1 = a.write(_goal_run)
    _, run2, epoch2 = a.write(_goal_run)
    spent = second_waits(
        a, b, "rate_limits",
        lambda c: _spend(c, run1, epoch1, accounting.acts_to_admit),
        lambda c: _spend(c, run2, epoch2, accounting.acts_to_admit),
    )  # fmt: skip
    assert spent == (True, False)
    assert a.read(lambda c: accounting.count_acts_since(c, "a", "deploy", 0.0)) == 1


@pytest.mark.backends("postgres")
def test_without_the_singleton_two_daemons_would_spend_one_budget(
    stores: tuple[SyncStore, SyncStore],
) -> None:
    """What the singleton prevents (the test above would be vacuous otherwise): under READ
    COMMITTED a plain count does not see the other daemon's uncommitted intent."""
    a, b = stores
    a.write(lambda c: accounting.set_rate_limits(c, [("a", "deploy")]))
    _, run1, epoch1 = a.write(_goal_run)
    _, run2, epoch2 = a.write(_goal_run)
    with first_holds(a, lambda c: _spend(c, run1, epoch1, accounting.count_acts_since)) as one:
        other = Background(b, lambda c: _spend(c, run2, epoch2, accounting.count_acts_since))
        second = other.join()  # it did not wait for anything
    assert (one, second) == (True, True)
    assert a.read(lambda c: accounting.count_acts_since(c, "a", "deploy", 0.0)) == 2


@pytest.mark.backends
def test_rate_limited_pairs_are_replaced_by_one_daemon_at_a_time(
    stores: tuple[SyncStore, SyncStore],
) -> None:
    """Two daemons starting at once write the table whole: the second waits, then replaces it
    (two interleaved DELETE + INSERT would break its primary key)."""
    a, b = stores
    pairs = [("a", "deploy"), ("a", "mail")]
    second_waits(a, b, "rate_limits", lambda c: accounting.set_rate_limits(c, pairs))
    got = a.read(lambda c: c.execute("SELECT agent, action FROM rate_limited").fetchall())
    assert sorted(tuple(r) for r in got) == pairs


EXPIRING = """
[models.default]
provider = "template"

[agents.a]
actions = ["finish"]
policy = { expire = { question = { after_s = 600, on_expire = "remind" } } }
"""


@pytest.mark.backends
def test_an_expiring_item_is_reminded_about_once_and_expired_once(
    stores: tuple[SyncStore, SyncStore], tmp_path: Path
) -> None:
    a, b = stores
    conf = tmp_path / "config.toml"
    conf.write_text(EXPIRING)
    cfg = config.load(conf)

    def scheduler() -> Scheduler:
        deps = Deps(config=cfg, store=None, models={}, executors={}, sources={}, owner="x")  # type: ignore[arg-type]
        return Scheduler(deps, lambda run_id, epoch: None)

    one, two = scheduler(), scheduler()

    def arrange(c: Conn) -> tuple[int, int]:
        goal, run, _ = _goal_run(c)
        question = qi.post(c, InboxKind.QUESTION, title="which?", goal_id=goal, run_id=run,
                           expires_at=NOW)  # fmt: skip
        notice = qi.post(c, InboxKind.NOTICE, title="fyi", goal_id=goal, expires_at=NOW)
        return question, notice

    question, notice = a.write(arrange)

    def expire(s: Scheduler, item_id: int) -> Callable[[Conn], bool]:
        return lambda c: s._expire_one(c, item=qi.get_item(c, item_id), now=NOW)

    # The question is reminded about (still open, its expiry pushed): once, not twice.
    second_waits(a, b, "inbox_expiry", expire(one, question), expire(two, question))
    reminders = a.read(lambda c: [i for i in qi.list_items(c) if i.data.get("reminds")])
    assert len(reminders) == 1
    item = a.read(lambda c: qi.get_item(c, question))
    assert item.status == InboxStatus.OPEN and item.data["reminders"] == 1
    # The notice expires: the first daemon closes it, the second finds it closed.
    closed = second_waits(a, b, "inbox_expiry", expire(one, notice), expire(two, notice))
    assert closed == (True, False)
    assert a.read(lambda c: qi.get_item(c, notice)).status == InboxStatus.EXPIRED


NOTIFYING = """
[models.default]
provider = "template"

[notify.ops]
type = "webhook"
url = "http://127.0.0.1:9/hook"

[agents.a]
actions = ["finish"]

[agents.a.notify]
channels = ["ops"]
on = ["question"]
"""


@pytest.mark.backends
def test_queued_items_are_planned_by_one_daemon_at_a_time(
    stores: tuple[SyncStore, SyncStore], tmp_path: Path
) -> None:
    a, b = stores
    conf = tmp_path / "config.toml"
    conf.write_text(NOTIFYING)
    cfg = config.load(conf)

    def post(c: Conn) -> None:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        for n in range(3):
            qi.post(c, InboxKind.QUESTION, title=f"q{n}", goal_id=goal)

    a.write(post)
    planned = second_waits(
        a,
        b,
        "notify_queue",
        lambda c: plan_queued(c, cfg, NOW),
        lambda c: plan_queued(c, cfg, NOW + 5),
    )
    assert planned == (3, 0)  # the second found the queue empty
    due = a.read(lambda c: [r.next_attempt_at for r in outbox.due(c, NOW + 60)])
    assert due == [NOW] * 3  # planned once, at the first daemon's time


# ── claims ───────────────────────────────────────────────────────────────────────────────────────


def _messages(c: Conn, n: int) -> list[int]:
    for i in range(n):
        outbox.add(c, key=f"{i}.0:ops:0", channel="ops", item_id=None, goal_id=None, stage=0,
                   message={"n": i}, due_at=NOW - 10 + i, now=NOW - 10)  # fmt: skip
    return [int(r[0]) for r in c.execute("SELECT outbox_id FROM outbox ORDER BY outbox_id")]


def _claim_messages(owner: str, limit: int = 2, claim_s: float = 60) -> Callable[[Conn], list[int]]:
    def work(c: Conn) -> list[int]:
        ids = [r.outbox_id for r in outbox.due(c, NOW, limit, owner)]
        outbox.claim(c, ids, owner, claim_s)
        return ids

    return work


def concurrently(a: SyncStore, b: SyncStore, work_a: Callable[[Conn], Any],
                 work_b: Callable[[Conn], Any]) -> tuple[Any, Any]:  # fmt: skip
    """On PostgreSQL: the second claims while the first's claim is uncommitted (SKIP LOCKED:
    it neither waits nor takes the same rows). On SQLite one writer at a time: one after the
    other, with the same outcome."""
    if a.backend.dialect.engine == "postgres":
        with first_holds(a, work_a) as one:
            two = Background(b, work_b).join()  # does not wait for the first
        return one, two
    return a.write(work_a), b.write(work_b)


@pytest.mark.backends
def test_two_daemons_claim_disjoint_messages(stores: tuple[SyncStore, SyncStore]) -> None:
    a, b = stores
    ids = a.write(lambda c: _messages(c, 4))
    one, two = concurrently(a, b, _claim_messages("A"), _claim_messages("B"))
    assert one == ids[:2] and two == ids[2:]
    # Claimed rows are nobody else's: a third pass finds nothing, and `next_due_at` does not
    # show B what A is sending (or B would spin on it).
    assert a.write(_claim_messages("C")) == []
    assert a.read(lambda c: outbox.next_due_at(c, "C")) is None
    assert a.read(lambda c: outbox.next_due_at(c, "A")) == NOW - 10
    # An outcome lets go: a retry is anyone's when due; a stale failure report is not recorded.
    b.write(lambda c: outbox.attempt_failed(c, ids[2], NOW, "boom", NOW - 1, owner="B"))
    a.write(lambda c: outbox.attempt_failed(c, ids[3], NOW, "stale", NOW - 1, owner="A"))
    a.write(lambda c: outbox.sent(c, ids[0], NOW))
    assert a.write(_claim_messages("C", limit=5)) == [ids[2]]
    attempts = a.read(lambda c: dict(c.execute("SELECT outbox_id, attempts FROM outbox")))
    assert attempts == {ids[0]: 1, ids[1]: 0, ids[2]: 1, ids[3]: 0}


@pytest.mark.backends
def test_a_message_claim_lapses_on_the_database_clock(stores: tuple[SyncStore, SyncStore]) -> None:
    """A daemon that died mid-send strands nothing: once its claim's time has passed on the
    database's clock, another daemon takes the message (and sends it again: at least once)."""
    a, b = stores
    (msg,) = a.write(lambda c: _messages(c, 1))
    assert a.write(_claim_messages("dead", claim_s=-1)) == [msg]  # lapsed at once
    assert b.write(_claim_messages("B")) == [msg]
    assert a.write(_claim_messages("C")) == []  # B's claim is live


@pytest.mark.backends("sqlite")
def test_on_sqlite_a_new_daemon_lets_go_of_the_claims_before_it(
    stores: tuple[SyncStore, SyncStore],
) -> None:
    """SQLite's home lock makes the starting daemon the only one: a dead daemon's claims are
    let go at once (a restart resends at once, as before claims). PostgreSQL's wait to lapse."""
    a, _ = stores
    (msg,) = a.write(lambda c: _messages(c, 1))
    a.write(_claim_messages("dead"))
    cid = a.write(lambda c: _checkins(c, 1))[0]
    a.write(lambda c: qc.claim(c, [cid], "dead", NOW))
    assert a.write(lambda c: outbox.release_others(c, "new")) == 1
    assert a.write(lambda c: qc.release_others(c, "new")) == 1
    assert a.write(_claim_messages("new")) == [msg]
    assert a.write(lambda c: qc.claim(c, [cid], "new", NOW)) == [cid]


@pytest.mark.backends("postgres")
def test_on_postgres_a_new_daemon_leaves_the_claims_of_others(
    stores: tuple[SyncStore, SyncStore],
) -> None:
    a, _ = stores
    a.write(lambda c: _messages(c, 1))
    a.write(_claim_messages("alive"))
    cid = a.write(lambda c: _checkins(c, 1))[0]
    a.write(lambda c: qc.claim(c, [cid], "alive", NOW))
    assert a.write(lambda c: outbox.release_others(c, "new")) == 0
    assert a.write(lambda c: qc.release_others(c, "new")) == 0
    assert a.write(_claim_messages("new")) == []


def _checkins(c: Conn, goals: int, per_goal: int = 1) -> list[int]:
    ids = []
    for g in range(goals):
        goal = q.add_goal(c, title=f"g{g}", why="t", agent="a", criteria=[], deadline=None)
        for n in range(per_goal):
            found = qc.add_due(c, goal, due_at=NOW - 100 + n, fired_at=NOW - 100 + n)
            assert found is not None
            ids.append(found)
    return ids


@pytest.mark.backends
def test_two_daemons_claim_disjoint_checkins(stores: tuple[SyncStore, SyncStore]) -> None:
    a, b = stores
    ids = a.write(lambda c: _checkins(c, 3))
    open_a = a.read(lambda c: qc.open_ids(c, NOW, "A"))
    open_b = a.read(lambda c: qc.open_ids(c, NOW, "B"))
    assert open_a == open_b == ids  # both daemons see all three due
    one, two = concurrently(
        a, b, lambda c: qc.claim(c, open_a, "A", NOW), lambda c: qc.claim(c, open_b, "B", NOW)
    )
    assert sorted(one + two) == ids and not set(one) & set(two)
    assert one == ids  # the first took all it asked for; the second none of them
    assert a.read(lambda c: qc.open_ids(c, NOW, "B")) == []  # A's, not B's to look at


@pytest.mark.backends
def test_a_goals_checkins_are_claimed_in_order(stores: tuple[SyncStore, SyncStore]) -> None:
    """Only a goal's oldest open check-in is claimable: another daemon never runs its next one
    beside it."""
    a, b = stores
    first, second = a.write(lambda c: _checkins(c, 1, per_goal=2))
    assert a.write(lambda c: qc.claim(c, [first, second], "A", NOW)) == [first]
    assert b.write(lambda c: qc.claim(c, [second], "B", NOW)) == []


@pytest.mark.backends
def test_a_checkin_is_moved_on_only_under_its_claim(stores: tuple[SyncStore, SyncStore]) -> None:
    """Every write of a check-in renews its owner's claim first, in the same transaction; a
    daemon whose claim lapsed and was taken over is refused, its write rolled back."""
    a, b = stores
    (cid,) = a.write(lambda c: _checkins(c, 1))
    assert a.write(lambda c: qc.claim(c, [cid], "A", NOW, claim_s=-1)) == [cid]  # lapsed
    b.write(lambda c: qc.hold(c, cid, "B"))  # taken over
    with pytest.raises(qc.Claimed):
        a.write(lambda c: (qc.hold(c, cid, "A"), qc.advance(c, cid, "due", status="deciding")))
    assert a.read(lambda c: qc.get(c, cid)).status == "due"
    b.write(lambda c: (qc.hold(c, cid, "B"), qc.advance(c, cid, "due", status="deciding")))
    b.write(lambda c: qc.release(c, cid, "B"))
    a.write(lambda c: qc.hold(c, cid, "A"))  # let go: anyone's again


@pytest.mark.backends("postgres")
def test_a_checkin_claim_waits_for_a_renewal_in_flight(stores: tuple[SyncStore, SyncStore]) -> None:
    """The predicate is in the write: a takeover that races its owner's renewal waits for it on
    the row and then re-reads the claim (live again): it does not take the row."""
    a, b = stores
    (cid,) = a.write(lambda c: _checkins(c, 1))
    a.write(lambda c: qc.claim(c, [cid], "A", NOW, claim_s=-1))  # lapsed …
    with first_holds(a, lambda c: qc.hold(c, cid, "A")):  # … and being renewed
        other = Background(b, lambda c: qc.hold(c, cid, "B"))
        until("the takeover to wait on the row", lambda: _row_lock_waits(a))
    with pytest.raises(qc.Claimed):
        other.join()


def _row_lock_waits(store: SyncStore) -> bool:
    row = store.read(
        lambda c: c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
    )
    return int(row[0]) > 0
