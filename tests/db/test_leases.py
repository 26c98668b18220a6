"""Leases (agentd/db/leases.py) on both engines: a daemon claims only runs nobody holds, renews
what it holds with one statement, sees what another daemon took; and on PostgreSQL the fence
refuses a zombie's writes even while the new owner's epoch bump is not committed yet (DESIGN §7)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentd.db import checkins, leases, outbox
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db.store import SyncStore
from agentd.errors import Refused
from agentd.models import RunStatus, StepKind

pytestmark = pytest.mark.backends


@pytest.fixture
def store(home: Any) -> SyncStore:
    home.root.mkdir(parents=True, exist_ok=True)
    return home.store  # type: ignore[no-any-return]


def new_runs(store: SyncStore, n: int) -> list[int]:
    def work(c: Any) -> list[int]:
        goal = q.add_goal(c, title="g", why="w", agent="a", criteria=[], deadline=None)
        return [q.create_run(c, goal_id=goal, agent="a", trigger="cli") for _ in range(n)]

    return store.write(work)


def test_claim_free_takes_unowned_runs_once(store: SyncStore) -> None:
    runs = new_runs(store, 3)
    first = store.write(lambda c: leases.claim_free(c, "A", 30, lapsed=False))
    again = store.write(lambda c: leases.claim_free(c, "B", 30, lapsed=True))
    assert [r for r, _ in first] == runs
    assert again == []  # held by A, lease not lapsed


def test_claim_free_takes_a_lapsed_lease_with_a_new_epoch(store: SyncStore) -> None:
    (run,) = new_runs(store, 1)
    # A's lease lapsed a second ago (a lease of a millisecond may not have, on SQLite's clock).
    ((_, epoch_a),) = store.write(lambda c: leases.claim_free(c, "A", -1.0, lapsed=False))
    assert store.write(lambda c: leases.claim_free(c, "B", 30, lapsed=False)) == []
    (taken,) = store.write(lambda c: leases.claim_free(c, "B", 30, lapsed=True))
    assert taken == (run, epoch_a + 1)
    # A's late write is refused: the epoch moved on.
    with pytest.raises(Refused, match="lease lost"):
        store.write(lambda c: qt.finish(c, run, epoch_a, RunStatus.SUCCEEDED, "zombie"))
    finish = store.write(lambda c: qt.finish(c, run, taken[1], RunStatus.SUCCEEDED, "B"))
    assert finish.kind == StepKind.FINISH


def test_renew_extends_what_the_owner_holds_and_taken_names_the_rest(store: SyncStore) -> None:
    a1, a2, b1 = new_runs(store, 3)
    store.write(lambda c: leases.register(c, owner="A", host="h", pid=1, version="v", lease_s=30))
    store.write(lambda c: [leases.claim_run(c, r, "A", 30) for r in (a1, a2)])
    store.write(lambda c: leases.claim_run(c, b1, "B", 30))
    held = store.write(lambda c: leases.renew(c, "A", 30))
    assert [r for r, _ in held] == [a1, a2]
    assert store.read(lambda c: leases.taken(c, "A", {a1, a2, b1})) == [b1]
    (row,) = store.read(leases.daemons)
    assert (row.owner, row.runs_held, row.live) == ("A", 2, True)


def test_stopped_releases_runs_for_another_daemon_at_once(store: SyncStore) -> None:
    (run,) = new_runs(store, 1)
    store.write(lambda c: leases.register(c, owner="A", host="h", pid=1, version="v", lease_s=30))
    store.write(lambda c: leases.claim_run(c, run, "A", 30))
    assert store.write(lambda c: leases.stopped(c, "A", release=True)) == 1
    assert [r for r, _ in store.write(lambda c: leases.claim_free(c, "B", 30, lapsed=False))] == [
        run
    ]
    (row,) = store.read(leases.daemons)
    assert row.stopped_at is not None and not row.live


def test_reclaim_takes_only_our_own_running_run(store: SyncStore) -> None:
    mine, theirs = new_runs(store, 2)
    store.write(lambda c: leases.claim_run(c, mine, "A", 30))
    store.write(lambda c: leases.claim_run(c, theirs, "B", 30))
    assert store.write(lambda c: leases.reclaim(c, theirs, "A", 30)) is None
    assert store.write(lambda c: leases.reclaim(c, mine, "A", 30)) == 2


ZOMBIE_WRITES = {
    "step": lambda c, run, epoch: q.append_step(c, run, epoch, StepKind.OBSERVE, data={}),
    # With its seq given (the build driver's steps), no read of the fence first: the insert's own.
    "step at seq": lambda c, run, epoch: q.append_step(
        c, run, epoch, StepKind.OBSERVE, seq=2, data={}
    ),
    "finish": lambda c, run, epoch: qt.finish(c, run, epoch, RunStatus.SUCCEEDED, "zombie"),
}


@pytest.mark.backends("postgres")
@pytest.mark.parametrize("write", sorted(ZOMBIE_WRITES))
def test_fence_refuses_a_zombie_while_the_new_owners_bump_is_uncommitted(
    home: Any, store: SyncStore, write: str
) -> None:
    """The race READ COMMITTED opens: B bumps the epoch and has not committed; A's journal step
    and its finish must wait for B and then be refused, not pass on the old row (a plain read of
    the fence, or an INSERT … WHERE EXISTS, sees the committed old epoch and lets them through)."""
    (run,) = new_runs(store, 1)
    epoch_a = store.write(lambda c: leases.claim_run(c, run, "A", 30))
    claimer = SyncStore(home.paths.db, backend=home.backend())
    zombie = SyncStore(home.paths.db, backend=home.backend())
    outcome: list[BaseException | str] = []

    def zombie_writes() -> None:
        try:
            zombie.write(lambda c: ZOMBIE_WRITES[write](c, run, epoch_a))
            outcome.append("written")
        except BaseException as e:
            outcome.append(e)

    try:
        with claimer.transaction() as c:
            epoch_b = leases.claim_run(c, run, "B", 30)  # the bump, not committed yet
            thread = threading.Thread(target=zombie_writes)
            thread.start()
            # The zombie is now blocked on B's row lock (FOR SHARE waits for the bump): wait until
            # the server says so, then commit.
            _wait_for_lock_waiter(home)
        thread.join(timeout=30)
        assert len(outcome) == 1 and isinstance(outcome[0], Refused), outcome
        steps = store.read(lambda c: q.list_steps(c, run))
        assert [s.kind for s in steps] == [StepKind.START]
        assert store.read(lambda c: q.get_run(c, run)).lease_epoch == epoch_b
    finally:
        claimer.close()
        zombie.close()


def _wait_for_lock_waiter(home: Any) -> None:
    """Until some session of this database waits on a lock (polled on a third connection)."""
    watcher = SyncStore(home.paths.db, backend=home.backend())
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            n = watcher.read(
                lambda c: c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                ).fetchone()[0]
            )
            if n:
                return
            time.sleep(0.01)
        raise AssertionError("the zombie's write never waited on the new owner's lock")
    finally:
        watcher.close()


def test_claims_of_a_gone_daemon_are_freed_and_a_live_ones_kept(store: SyncStore) -> None:
    """Check-ins and messages claimed for minutes are let go as soon as their daemon stopped or
    went silent past its lease; a live daemon's stay claimed."""
    now = time.time()

    def arrange(c: Any) -> None:
        leases.register(c, owner="live", host="h", pid=1, version="v", lease_s=30)
        leases.register(c, owner="gone", host="h", pid=2, version="v", lease_s=1.0)
        # silent for a minute, past its lease (a lease of a millisecond may not have run out by
        # SQLite's millisecond clock)
        c.execute("UPDATE daemons SET renewed_at = renewed_at - 60 WHERE owner = 'gone'")
        goal = q.add_goal(c, title="g", why="w", agent="a", criteria=[], deadline=None)
        for n, owner in enumerate(("live", "gone")):
            checkin = checkins.add_due(c, goal, due_at=now - 100 + n, fired_at=now - 100 + n)
            assert checkin is not None
            checkins.hold(c, checkin, owner)
            outbox.add(c, key=f"{n}:ops:0", channel="ops", item_id=None, goal_id=None, stage=0,
                       message={"n": n}, due_at=now, now=now)  # fmt: skip
        for n, owner in enumerate(("live", "gone")):
            outbox.claim(c, [n + 1], owner, 180)

    store.write(arrange)
    assert store.write(leases.free_claims_of_the_gone) == 2
    claimed = store.read(
        lambda c: [
            (t, r[0])
            for t in ("checkins", "outbox")
            for r in c.execute(f"SELECT claimed_by FROM {t} ORDER BY 1").fetchall()  # noqa: S608
        ]
    )
    assert sorted(claimed, key=str) == sorted(
        [("checkins", "live"), ("checkins", None), ("outbox", "live"), ("outbox", None)], key=str
    )


@pytest.mark.backends("postgres")
def test_a_due_timer_being_woken_elsewhere_is_skipped_not_waited_for(
    home: Any, store: SyncStore
) -> None:
    """Daemons sharing the database all see a due timer: the one that finds the run's row locked
    (another is waking it) moves on at once; unlocked, the same wake goes through."""
    (run,) = new_runs(store, 1)
    epoch = store.write(lambda c: leases.claim_run(c, run, "A", 30))
    store.write(lambda c: qt.suspend(c, run, epoch, {"kind": "timer"}, wake_in_s=-1.0))
    wait = store.read(lambda c: q.get_run(c, run)).wait
    other = SyncStore(home.paths.db, backend=home.backend())
    try:
        with other.transaction() as c:  # another daemon holds the run's row
            c.execute("SELECT 1 FROM runs WHERE run_id = ? FOR UPDATE", (run,))
            # Waiting instead would end in the lock timeout's error, not in None.
            skipped = store.write(
                lambda c2: qt.wake(c2, run, "B", {"why": "timer"}, 30, expect=wait,
                                   skip_locked=True)
            )  # fmt: skip
            assert skipped is None
        woken = store.write(
            lambda c: qt.wake(c, run, "B", {"why": "timer"}, 30, expect=wait, skip_locked=True)
        )
        assert woken == epoch + 1
    finally:
        other.close()
