"""PostgreSQL's schema (agentd/db/postgres/schema.py) migrated into an empty database: the same
tables, columns (in matching types, with the same NOT NULLs) and indexes as SQLite's migrated file,
both triggers doing their work, the ledger, and the refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.db import items, queries
from agentd.db.postgres import schema
from agentd.db.postgres.connection import PostgresConn, connect
from agentd.db.sqlite.connection import open_migrated
from agentd.errors import StateError
from agentd.models import InboxKind, StepKind

TYPES = {"INTEGER": {"bigint"}, "REAL": {"double precision"}, "TEXT": {"text", "jsonb"}}


def sqlite_catalogue(tmp_path: Path) -> tuple[dict[str, dict[str, tuple[str, bool]]], set[str]]:
    conn = open_migrated(tmp_path / "agentd.db")
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    tables = {
        t: {r[1]: (r[2], bool(r[3]) or bool(r[5])) for r in conn.execute(f"PRAGMA table_info({t})")}
        for t in names
    }
    indexes = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'"
        )
    }
    conn.close()
    return tables, indexes


def pg_catalogue(conn: PostgresConn) -> tuple[dict[str, dict[str, tuple[str, bool]]], set[str]]:
    tables: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, kind, nullable in conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name NOT IN ('schema_migrations', 'agentd_locks')"
    ):
        tables.setdefault(table, {})[column] = (kind, nullable == "NO")
    indexes = {
        r[0]
        for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"
            " AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'"
        )
    }
    return tables, indexes


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresConn]:
    conn = connect(pg_url)
    yield conn
    conn.close()


def test_postgres_schema_matches_sqlites(pg: PostgresConn, tmp_path: Path) -> None:
    assert schema.migrate(pg) == len(schema.MIGRATIONS)
    want_tables, want_indexes = sqlite_catalogue(tmp_path)
    got_tables, got_indexes = pg_catalogue(pg)
    assert sorted(got_tables) == sorted(want_tables)
    for table, columns in want_tables.items():
        assert sorted(got_tables[table]) == sorted(columns), table
        for column, (kind, not_null) in columns.items():
            got_kind, got_not_null = got_tables[table][column]
            assert got_kind in TYPES[kind], (table, column, got_kind)
            assert got_not_null == not_null, (table, column)
    assert got_indexes == want_indexes


def test_postgres_migrate_records_each_migration_once(pg: PostgresConn) -> None:
    schema.migrate(pg)
    assert schema.migrate(pg) == len(schema.MIGRATIONS)  # again: nothing to do
    rows = pg.execute("SELECT version, name, breaking FROM schema_migrations").fetchall()
    assert [(v, b) for v, _, b in rows] == [(i + 1, False) for i in range(len(schema.MIGRATIONS))]
    assert schema.version(pg) == len(schema.MIGRATIONS)


def test_postgres_migrate_refuses_a_newer_breaking_schema_and_keeps_a_compatible_one(
    pg: PostgresConn,
) -> None:
    schema.migrate(pg)
    newer = len(schema.MIGRATIONS) + 1
    pg.execute(
        "INSERT INTO schema_migrations VALUES (?, 'from a newer agentd', false, 0)", (newer,)
    )
    assert schema.migrate(pg) == len(schema.MIGRATIONS)  # compatible: left as it is
    pg.execute("INSERT INTO schema_migrations VALUES (?, 'drops a column', true, 0)", (newer + 1,))
    with pytest.raises(StateError, match=r"breaking migrations newer.*drops a column"):
        schema.migrate(pg)


def test_postgres_failed_migration_rolls_back_with_its_ledger_row(pg: PostgresConn) -> None:
    broken = [*schema.MIGRATIONS, schema.Migration("broken", "CREATE TABLE extra (x int); nope")]
    with pytest.raises(StateError, match=f"migration {len(broken)} failed"):
        schema.migrate(pg, broken)
    assert schema.version(pg) == len(schema.MIGRATIONS)
    assert pg.execute("SELECT to_regclass('extra')").fetchone()[0] is None


def test_postgres_triggers_log_rate_limited_acts_and_queue_new_items(pg: PostgresConn) -> None:
    schema.migrate(pg)
    goal_id = queries.add_goal(pg, title="t", why="w", agent="a", criteria=[], deadline=None)
    run_id = queries.create_run(pg, goal_id=goal_id, agent="a", trigger="cli")
    queries.append_step(pg, run_id, 0, StepKind.ACT, action="restart", args={"unit": "x"})
    assert pg.execute("SELECT agent, action FROM rate_log").fetchall() == [("a", "restart")]
    item_id = items.post(pg, InboxKind.QUESTION, goal_id=goal_id, title="q?")
    assert pg.execute("SELECT item_id FROM notify_queue").fetchall() == [(item_id,)]
