"""A wake names the item, event or timer the run's current wait names, whatever happened between the
match and the write (issue 31, item 2).

Seen under a partition: a run waited for approval B, but its WAKE step recorded approval A, consumed
earlier in the same run; the run went past B's gate without B. The path: the daemon's scan found
(run, A) while the run still waited for A; its wake failed to commit (`db.commit_failed`); at its
next look the scan found (run, A) again, its reader's connection was then reset and reopened
(`db.reconnecting`) while another daemon woke the run on A, ran A's action and parked it on B;
the daemon then read the run's *new* wait with the *old* item and woke it "approved" by A.

Here that interleaving is forced on a real PostgreSQL database: the scheduler's scan is wrapped so
that, right after it reads, the test kills the writer's connection (the first look) or the
reader's, while a second store plays the other daemon (the second look). And the condition itself
is in the write (transitions.wake): a wake naming anything but what the wait names changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.daemon.scheduler import Scheduler
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import waits as qw
from agentd.db.conn import Conn
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import Store, SyncStore
from agentd.errors import StateError
from agentd.models import InboxKind, InboxStatus, StepKind
from agentd.runs.deps import Deps

CONFIG = """
[models.default]
provider = "template"

[agents.a]
actions = ["finish"]
"""


def park_on_approval(c: Conn, run_id: int, epoch: int, title: str) -> tuple[int, dict[str, Any]]:
    item = qi.post(c, InboxKind.APPROVAL, title=title, run_id=run_id, action="finish", args={})
    wait = {"kind": "inbox", "item_id": item, "why": "approval", "action": "finish"}
    qt.suspend(c, run_id, epoch, wait, item_id=item)
    return item, q.get_run(c, run_id).wait or {}


def arrange(c: Conn) -> tuple[int, int]:
    goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
    run = q.create_run(c, goal_id=goal, agent="a", trigger="t")
    epoch = leases.claim_run(c, run, "other", 60)
    item, _ = park_on_approval(c, run, epoch, "approve A?")
    qi.resolve(c, item, InboxStatus.APPROVED, answer="approved")
    return run, item


def terminate(url: str, keep: list[int] | None = None, only: int | None = None) -> int:
    """End this database's sessions but `keep`'s, or session `only` (a restart, a failover as
    one daemon sees it)."""
    admin = SyncStore(Path("unused"), backend=PostgresBackend(url, Path("/")), poke=False)
    try:
        rows = admin.read(
            lambda c: c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname ="
                " current_database() AND pid != pg_backend_pid() AND NOT (pid = ANY(?))"
                " AND (? OR pid = ?)",
                (keep or [], only is None, only or 0),
            ).fetchall()
        )
        return len(rows)
    finally:
        admin.close()


def backend_pid(c: Conn) -> int:
    return int(c.execute("SELECT pg_backend_pid()").fetchone()[0])


def wake_of_last(store: SyncStore, run_id: int) -> list[dict[str, Any]]:
    steps = store.read(lambda c: q.list_steps(c, run_id))
    return [s.data for s in steps if s.kind == StepKind.WAKE]


async def test_a_wake_matched_before_a_failed_commit_and_a_reconnect_never_lands_on_the_next_wait(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = SyncStore(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    run_id, first = other.write(arrange)
    other_pid = other.read(backend_pid)
    (tmp_path / "config.toml").write_text(CONFIG)
    store = Store(tmp_path / "agentd.db", backend=PostgresBackend(pg_url, tmp_path))
    await store.open()
    launched: list[tuple[int, int]] = []
    deps = Deps(config=config.load(tmp_path / "config.toml"), store=store, models={},
                executors={}, sources={}, owner="me")  # fmt: skip
    scheduler = Scheduler(deps, lambda r, e: launched.append((r, e)))

    looks = 0
    second = 0
    scan = qw.runs_with_resolved_items

    def meanwhile(c: Conn, since: float = 0.0) -> list[tuple[int, int]]:
        nonlocal looks, second
        found = scan(c, since)
        looks += 1
        reader = backend_pid(c)
        if looks == 1:  # the wake about to be written fails: its connection is gone
            assert terminate(pg_url, keep=[reader, other_pid]) == 1
        elif looks == 2:  # the reader reconnects; another daemon wakes the run on A meanwhile
            assert terminate(pg_url, only=reader) == 1

            def moved_on(c2: Conn) -> int:
                why = {"woke_by": "inbox", "why": "approval", "item_id": first,
                       "item_kind": "approval", "status": "approved"}  # fmt: skip
                epoch = qt.wake(c2, run_id, "other", why, 60)
                assert epoch is not None
                c2.execute("UPDATE inbox SET status = 'consumed' WHERE item_id = ?", (first,))
                item, _ = park_on_approval(c2, run_id, epoch, "approve B?")
                return item

            second = other.write(moved_on)
        return found

    monkeypatch.setattr(qw, "runs_with_resolved_items", meanwhile)
    try:
        with pytest.raises(StateError):  # its wake write meets the closed connection
            await scheduler.tick(force=True)
        assert looks == 1 and launched == []
        still = other.read(lambda c: q.get_run(c, run_id))
        assert still.status == "waiting" and (still.wait or {}).get("item_id") == first
        await scheduler.tick(force=True)  # the stale match, read before the reconnect
        assert looks == 2 and second
        run = other.read(lambda c: q.get_run(c, run_id))
        assert run.status == "waiting" and (run.wait or {}).get("item_id") == second, run
        assert [w["item_id"] for w in wake_of_last(other, run_id)] == [first]  # the other's
        assert launched == []

        other.write(lambda c: qi.resolve(c, second, InboxStatus.APPROVED, answer="approved"))
        await scheduler.tick(force=True)
        wakes = wake_of_last(other, run_id)
        assert [w["item_id"] for w in wakes] == [first, second]
        assert wakes[-1]["status"] == "approved" and launched == [(run_id, launched[0][1])]
    finally:
        await store.close()
        other.close()


def test_the_write_refuses_a_cause_the_current_wait_does_not_name(pg_url: str) -> None:
    """The condition is in the UPDATE: a wake whose `why` names another item, another event or a
    timer not due yet changes nothing, even with `expect` equal to the current wait."""
    store = SyncStore(Path("unused"), backend=PostgresBackend(pg_url, Path("/")), poke=False)
    try:
        run_id, first = store.write(arrange)
        why_first = {"woke_by": "inbox", "item_id": first, "status": "approved"}

        def to_second(c: Conn) -> tuple[int, dict[str, Any]]:
            epoch = qt.wake(c, run_id, "me", why_first, 60)
            assert epoch is not None
            return park_on_approval(c, run_id, epoch, "approve B?")

        second, wait = store.write(to_second)
        store.write(lambda c: qi.resolve(c, second, InboxStatus.APPROVED, answer="approved"))
        stale: Callable[[Conn], int | None] = lambda c: qt.wake(  # noqa: E731
            c, run_id, "me", why_first, 60, expect=wait
        )
        assert store.write(stale) is None
        event = {"woke_by": "event", "event": "deploy.done", "event_id": 10**6}
        assert store.write(lambda c: qt.wake(c, run_id, "me", event, 60, expect=wait)) is None
        timer = {"woke_by": "timer"}
        assert store.write(lambda c: qt.wake(c, run_id, "me", timer, 60, due=0.0)) is None
        right = {"woke_by": "inbox", "item_id": second, "status": "approved"}
        assert store.write(lambda c: qt.wake(c, run_id, "me", right, 60, expect=wait)) is not None
    finally:
        store.close()
