"""The migrated template of the PostgreSQL fixtures (tests/postgres.py's `pg_migrated`,
`pg_migrated_url`): a copy is what migrating an empty database makes, holds no rows, and is the
test's own (what one test writes, the next copy does not see)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.db.postgres import schema
from agentd.db.postgres.backend import PostgresBackend


def _schema(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'public'"
            " ORDER BY table_name, column_name"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " ORDER BY indexname"
        ).fetchall()
        ledger = conn.execute("SELECT version, name, breaking FROM schema_migrations").fetchall()
    return {"columns": columns, "indexes": indexes, "ledger": sorted(ledger)}


def test_a_copy_of_the_template_is_what_migrating_an_empty_database_makes(
    pg_url: str, pg_migrated_url: str, tmp_path: Path
) -> None:
    PostgresBackend(pg_url, tmp_path).open_migrated().close()
    migrated = _schema(pg_url)
    assert len(migrated["ledger"]) == len(schema.MIGRATIONS)
    assert _schema(pg_migrated_url) == migrated


@pytest.mark.parametrize("attempt", [1, 2])
def test_each_copy_of_the_template_is_the_tests_own_and_holds_no_rows(
    pg_migrated_url: str, attempt: int
) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_migrated_url) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'schema_migrations'"
            )
        ]
        assert "goals" in tables
        for name in tables:
            count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name))
            assert conn.execute(count).fetchone() == (0,), name
        # Leave a goal behind: the other attempt's copy must not hold it.
        conn.execute(
            "INSERT INTO goals (title, why, agent, status, created_at, updated_at)"
            " VALUES (%s, 'a test', 'default', 'active', 0, 0)",
            (f"left by attempt {attempt}",),
        )
