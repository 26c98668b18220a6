"""`agentd store copy` into a shared PostgreSQL database cannot be held up by a role with nothing
but the default CONNECT: one copy at a time is a row lock of agentd's own table (agentd_locks),
not an advisory lock whose key anyone computes; and the rows of that table (a daemon that
started on the target made them) are not state that makes the target "not empty". Real server,
real role."""

from __future__ import annotations

from pathlib import Path

import psycopg

from agentd.db import accounting
from agentd.db import copy as db_copy
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.sqlite.backend import SQLiteBackend
from agentd.db.sqlite.connection import open_migrated
from agentd.db.store import SyncStore
from tests.conftest import backend_of
from tests.db.test_pg_intruder import finishes, intruder

__all__ = ["intruder"]  # the fixture, used by name
OLD_COPY_LOCK = 0x61676E746401  # the advisory key `store copy` used to take


def test_copy_is_not_held_up_by_a_role_with_only_connect(
    tmp_path: Path, pg_url: str, intruder: str
) -> None:
    open_migrated(tmp_path / "agentd.db").close()  # a new home: every table, empty
    with psycopg.connect(intruder, autocommit=True) as evil:
        evil.execute("SELECT pg_advisory_lock(%s)", (OLD_COPY_LOCK,))  # held as long as it likes
        report = finishes(
            lambda: db_copy.copy(
                SQLiteBackend(tmp_path / "agentd.db"), PostgresBackend(pg_url, tmp_path)
            )
        )
    assert report.tables and all(t.ok for t in report.tables)


def test_a_target_a_daemon_started_on_is_still_taken(tmp_path: Path, pg_url: str) -> None:
    """A daemon that started on the empty database locked a singleton's row: no state."""
    started = SyncStore(tmp_path / "b.db", backend=backend_of(tmp_path / "b.db", pg_url))
    try:
        started.write(lambda c: accounting.set_rate_limits(c, []))  # takes "rate_limits"
    finally:
        started.close()
    open_migrated(tmp_path / "agentd.db").close()
    report = db_copy.copy(SQLiteBackend(tmp_path / "agentd.db"), PostgresBackend(pg_url, tmp_path))
    assert report.tables and all(t.ok for t in report.tables)
