"""The state layer on real SQLite files: migrations are atomic, the schema is what it claims; and on
both engines (a SQLite file, a PostgreSQL database): group commit keeps each request's outcome its
own, closing never loses a promised write, retention keeps what it must."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd.db import leases, meta
from agentd.db import queries as q
from agentd.db import transitions as qt
from agentd.db import world as worlds
from agentd.db.backend import Backend
from agentd.db.conn import Conn
from agentd.db.sqlite import schema
from agentd.db.sqlite.connection import connect
from agentd.db.store import Store, SyncStore
from agentd.errors import Refused, StateError
from agentd.models import RunStatus, StepKind


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_migration_failing_midway_leaves_the_previous_schema(tmp_path: Path) -> None:
    conn = connect(tmp_path / "agentd.db")
    schema.migrate(conn, schema.MIGRATIONS)
    before = tables(conn)
    broken = [*schema.MIGRATIONS, "CREATE TABLE extra (x INTEGER) STRICT;\nSELECT * FROM nope;"]
    failing = len(schema.MIGRATIONS) + 1
    with pytest.raises(StateError, match=f"migration {failing} failed and was rolled back"):
        schema.migrate(conn, broken)
    assert schema.version(conn) == len(schema.MIGRATIONS)
    assert tables(conn) == before  # `extra` was created inside the failed migration: gone
    conn.close()


def test_migration_of_an_empty_database_is_strict_and_in_wal(tmp_path: Path) -> None:
    store = SyncStore(tmp_path / "agentd.db")
    conn = store.conn
    assert schema.version(conn) == len(schema.MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    for name in ("goals", "runs", "steps", "world", "events", "inbox", "schedules"):
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
        assert "STRICT" in sql, name
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"next_wake_at", "lease_owner", "lease_expires_at", "lease_epoch"} <= columns
    store.close()


def _open_fresh_databases(folder: Path, rounds: int, barrier: Any) -> None:
    """In a child process: open (and so migrate) each round's fresh database with the other child."""
    for i in range(rounds):
        barrier.wait(10)
        SyncStore(folder / f"race{i}.db").close()


def test_two_processes_migrating_one_fresh_database_both_succeed(tmp_path: Path) -> None:
    rounds = 20  # a lost race ("table goals already exists") needs a few tries to show
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    children = [
        ctx.Process(target=_open_fresh_databases, args=(tmp_path, rounds, barrier))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(40)
    assert [child.exitcode for child in children] == [0, 0]
    for i in range(rounds):
        conn = connect(tmp_path / f"race{i}.db")
        assert schema.version(conn) == len(schema.MIGRATIONS)
        conn.close()


def test_migration_semicolons_in_triggers_strings_and_comments_do_not_cut(tmp_path: Path) -> None:
    conn = connect(tmp_path / "agentd.db")
    script = """
    CREATE TABLE t (x TEXT);  -- a comment; with a semicolon
    CREATE TABLE log (x TEXT);
    CREATE TRIGGER t_log AFTER INSERT ON t BEGIN
        INSERT INTO log VALUES ('a;b');
        INSERT INTO log VALUES (NEW.x);
    END;
    /* a block comment; also */
    """
    assert schema.migrate(conn, [script]) == 1
    conn.execute("INSERT INTO t VALUES ('c')")
    assert [r[0] for r in conn.execute("SELECT x FROM log ORDER BY rowid")] == ["a;b", "c"]
    conn.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = connect(tmp_path / "agentd.db")
    conn.execute(f"PRAGMA user_version = {len(schema.MIGRATIONS) + 1}")
    with pytest.raises(StateError, match="newer than this agentd"):
        schema.migrate(conn)
    conn.close()


async def _run_with_steps(store: Store, runs: int) -> list[tuple[int, int]]:
    def setup(c: Conn) -> list[tuple[int, int]]:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        ids = [q.create_run(c, goal_id=goal, agent="a", trigger="t") for _ in range(runs)]
        return [(r, leases.claim_run(c, r, "me", 60)) for r in ids]

    return await store.write(setup)


BackendAt = Callable[[Path], Backend]


@pytest.mark.backends
async def test_group_commit_keeps_each_outcome_its_own(
    tmp_path: Path, backend_at: BackendAt
) -> None:
    path = tmp_path / "agentd.db"
    store = Store(path, backend=backend_at(path))
    await store.open()
    (run, epoch), (other, _) = await _run_with_steps(store, 2)
    good = [q.step_insert(run, epoch, StepKind.OBSERVE, seq)[1] for seq in (2, 3, 4)]
    fenced = q.step_insert(other, epoch + 7, StepKind.OBSERVE, 2)[1]  # a stale lease
    results = await asyncio.gather(
        *(store.insert(r) for r in good[:2]),
        store.insert(fenced),
        store.insert(good[2]),
        return_exceptions=True,
    )
    assert results[:2] == [None, None] and results[3] is None
    assert isinstance(results[2], Refused) and "lease lost" in str(results[2])
    seqs = await store.read(lambda c: [s.seq for s in q.list_steps(c, run)])
    assert seqs == [1, 2, 3, 4]
    assert await store.read(lambda c: len(q.list_steps(c, other))) == 1
    await store.close()


@pytest.mark.backends
async def test_store_close_commits_every_queued_write(
    tmp_path: Path, backend_at: BackendAt
) -> None:
    for attempt in range(30):  # the close/wake-up race needs many tries to show
        # A fresh SQLite file each time; on PostgreSQL the test's one database (a run each time).
        path = tmp_path / f"db{attempt}" / "agentd.db"
        path.parent.mkdir()
        store = Store(path, backend=backend_at(path))
        await store.open()
        ((run, epoch),) = await _run_with_steps(store, 1)
        rows = [q.step_insert(run, epoch, StepKind.OBSERVE, seq)[1] for seq in range(2, 12)]
        pending = [asyncio.ensure_future(store.insert(r)) for r in rows]
        await asyncio.sleep(0)  # let them queue
        await asyncio.wait_for(store.close(), 5)
        await asyncio.gather(*pending)
        check = SyncStore(path, backend=backend_at(path))
        assert len(check.read(lambda c, run=run: q.list_steps(c, run))) == 11
        check.close()


@pytest.mark.backends
async def test_store_refuses_writes_after_close(tmp_path: Path, backend_at: BackendAt) -> None:
    path = tmp_path / "agentd.db"
    store = Store(path, backend=backend_at(path))
    await store.open()
    await store.close()
    with pytest.raises(StateError, match="closed"):
        await store.write(lambda c: None)


@pytest.mark.backends
def test_retention_drops_old_finished_runs_steps_but_keeps_runs_and_live_journals(
    tmp_path: Path, backend_at: BackendAt
) -> None:
    path = tmp_path / "agentd.db"
    store = SyncStore(path, backend=backend_at(path))

    def arrange(c: Conn) -> tuple[int, int]:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        old, live = (q.create_run(c, goal_id=goal, agent="a", trigger="t") for _ in range(2))
        epoch = leases.claim_run(c, old, "me", 60)
        qt.finish(c, old, epoch, RunStatus.SUCCEEDED, "done long ago")
        c.execute("UPDATE runs SET updated_at = 1000 WHERE run_id = ?", (old,))
        worlds.add_snapshot(c, "a", None, {"x": 1}, {})
        worlds.add_snapshot(c, "a", None, {"x": 2}, {})  # the agent's latest look: kept
        c.execute("UPDATE world SET taken_at = 1000")
        return old, live

    old, live = store.write(arrange)
    pruned = store.write(lambda c: meta.prune(c, older_than=2000))
    assert pruned == 3  # the old run's START and FINISH steps, and the older snapshot
    assert store.read(lambda c: q.list_steps(c, old)) == []
    assert store.read(lambda c: q.get_run(c, old)).summary == "done long ago"
    assert [s.kind for s in store.read(lambda c: q.list_steps(c, live))] == [StepKind.START]
    store.close()
