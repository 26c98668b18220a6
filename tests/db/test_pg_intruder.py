"""A role that holds nothing but the default CONNECT on a shared PostgreSQL store (it cannot even
read `inbox`) cannot hold agentd up: the singletons and the migration lock are locks on agentd's
own tables, which such a role may not take, so the advisory locks it holds on every key agentd
once used stop nothing — a rate-limited intent, an event, an inbox expiry, a second store's start.
Its NOTIFY flood wakes the daemon a bounded number of times, and `doctor` says that PUBLIC may
connect, with the REVOKE to run. Real server, real role."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentd.db import accounting, leases, wake
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.conn import Conn
from agentd.db.dialect import singleton_key
from agentd.db.postgres import checks
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.postgres.listener import WAKE_GAP_S
from agentd.db.store import SyncStore
from agentd.models import InboxKind, StepKind, StepStatus
from tests.conftest import backend_of

SINGLETONS = ("rate_limits", "events", "inbox_expiry", "retention", "notify_queue",
              "trigger_cursor", "episodes", "poll:a", "goal_run:1")  # fmt: skip
OLD_MIGRATION_LOCK = 0x61676E746400  # the advisory key agentd's migrations used to take
DONE_S = 30.0  # each piece of work finishes long before this (lock_timeout is 5 s)


@pytest.fixture
def intruder(pg_url: str) -> Iterator[str]:
    """The URL of the same database as a new role with no grant at all (PUBLIC's CONNECT)."""
    role = f"intruder_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        yield pg_url.replace("postgresql://agentd@", f"postgresql://{role}@", 1)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
            )
            admin.execute(f"DROP ROLE {role}")


@pytest.fixture
def store(tmp_path: Path, pg_url: str) -> Iterator[SyncStore]:
    path = tmp_path / "agentd.db"
    s = SyncStore(path, backend=backend_of(path, pg_url))
    s.write(lambda c: accounting.set_rate_limits(c, [("a", "deploy")]))  # migrated
    yield s
    s.close()


def finishes(work: Callable[[], Any]) -> Any:
    """`work` on a thread: its result, which must come well within DONE_S (an error raised)."""
    got: dict[str, Any] = {}

    def run() -> None:
        try:
            got["result"] = work()
        except BaseException as e:
            got["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DONE_S)
    assert not thread.is_alive(), "agentd's work is held up by the intruder's locks"
    if "error" in got:
        raise got["error"]
    return got["result"]


def _intent(c: Conn) -> int:
    """A rate-limited intent as acting.py journals it (the count first, under "rate_limits")."""
    goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
    run = q.create_run(c, goal_id=goal, agent="a", trigger="t")
    epoch = leases.claim_run(c, run, "me", 60)
    spent = accounting.acts_to_admit(c, "a", "deploy", 0.0)
    q.append_step(c, run, epoch, StepKind.ACT, status=StepStatus.STARTED, action="deploy",
                  args={}, digest="d", data={})  # fmt: skip
    return spent


def test_postgres_a_role_with_only_connect_cannot_hold_up_agentd(
    store: SyncStore, intruder: str, tmp_path: Path, pg_url: str
) -> None:
    with psycopg.connect(intruder, autocommit=True) as evil:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            evil.execute("SELECT count(*) FROM inbox")  # what it may do: nothing of agentd's
        for name in SINGLETONS:  # every key it can compute, held for as long as it likes
            evil.execute("SELECT pg_advisory_lock(%s)", (singleton_key(name),))
        evil.execute("SELECT pg_advisory_lock(%s)", (OLD_MIGRATION_LOCK,))
        for lock in ("SELECT * FROM agentd_locks FOR UPDATE",
                     "LOCK TABLE schema_migrations IN EXCLUSIVE MODE"):  # fmt: skip
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                evil.execute("BEGIN")
                try:
                    evil.execute(lock)
                finally:
                    evil.execute("ROLLBACK")

        assert finishes(lambda: store.write(_intent)) == 0  # an approved action's intent
        event = finishes(lambda: store.write(lambda c: qi.add_event(c, "deploy", {}, None)))
        assert event is not None
        item = store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="n"))
        assert finishes(lambda: store.write(lambda c: qi.expiring(c, item))).item_id == item
        # Another daemon (or CLI) starting on the up-to-date database: no migration lock.
        second = SyncStore(tmp_path / "b.db", backend=backend_of(tmp_path / "b.db", pg_url))
        try:
            finishes(lambda: second.write(lambda c: accounting.set_rate_limits(c, [])))
        finally:
            second.close()


def test_postgres_doctor_warns_when_public_may_connect(store: SyncStore, pg_url: str) -> None:
    (found,) = [f for f in checks.examine(pg_url, 30.0) if f.name == "access"]
    assert not found.ok and found.warning and not found.required
    db = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    assert f"REVOKE CONNECT ON DATABASE {db} FROM PUBLIC" in found.message
    assert "GRANT CONNECT ON DATABASE" in found.message and "TO agentd" in found.message
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'REVOKE CONNECT ON DATABASE "{db}" FROM PUBLIC')
    (found,) = [f for f in checks.examine(pg_url, 30.0) if f.name == "access"]
    assert found.ok, found.message


def test_postgres_a_notify_storm_costs_a_bounded_number_of_wakes(
    intruder: str, tmp_path: Path, pg_url: str
) -> None:
    """Any role that can connect may NOTIFY agentd's channel: 20,000 notifications in 200
    commits are all read (the server's queue never backs up), but they wake the daemon at most
    once per WAKE_GAP_S of the time they took, plus the look after connecting and a last one."""
    woken: list[float] = []
    backend = PostgresBackend(pg_url, tmp_path)
    listener = backend.listener(lambda: woken.append(time.monotonic()), None)
    assert listener is not None
    try:
        deadline = time.monotonic() + DONE_S
        while not (listener.connected.is_set() and woken):
            assert time.monotonic() < deadline, "the listener never connected"
            time.sleep(0.01)
        started = time.monotonic()
        with psycopg.connect(intruder, autocommit=True) as evil:
            for burst in range(200):
                evil.execute(
                    "SELECT pg_notify(%s, %s || '-' || n) FROM generate_series(1, 100) n",
                    (wake.CHANNEL, str(burst)),
                )
        while listener.notifications < 20_000:
            assert time.monotonic() < deadline + DONE_S, listener.notifications
            time.sleep(0.01)
        took = time.monotonic() - started
        storm = [t for t in woken if t >= started]
        assert len(storm) <= 2 + took / WAKE_GAP_S, (len(storm), took)
    finally:
        listener.stop()


def test_postgres_doctor_warns_when_public_may_create_in_the_schema(
    store: SyncStore, pg_url: str
) -> None:
    """PostgreSQL before 15 lets every role create in schema public: such a role could take the
    name of a table a later migration makes (agentd_locks did), so that migration fails."""
    db = psycopg.conninfo.conninfo_to_dict(pg_url)["dbname"]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'REVOKE CONNECT ON DATABASE "{db}" FROM PUBLIC')
        admin.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")  # PostgreSQL 13 and 14's default
    try:
        (found,) = [f for f in checks.examine(pg_url, 30.0) if f.name == "access"]
        assert not found.ok and found.warning and not found.required
        assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC" in found.message, found.message
        assert "CONNECT" not in found.message, found.message
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    (found,) = [f for f in checks.examine(pg_url, 30.0) if f.name == "access"]
    assert found.ok, found.message
