"""Migration 12 (SQLite) / 8 (PostgreSQL) on a home an older agentd filled: an active goal's
schedule keeps its next fire (one never computed becomes due at once), a paused or closed goal's
schedules are parked (`next_fire_at` NULL, out of the due search), and resuming the goal makes
them due again. Each engine, from the schema the previous agentd left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.postgres import schema as pg_schema
from agentd.db.postgres.connection import connect as pg_connect
from agentd.db.sqlite import schema as sqlite_schema
from agentd.db.sqlite.connection import connect as sqlite_connect
from agentd.models import GoalStatus

pytestmark = pytest.mark.backends


def _old(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """A connection to a store at the previous schema, and how to migrate it the rest of the way
    (on PostgreSQL an empty database, `pg_url`: `store_url`'s is migrated already)."""
    if backend == "sqlite":
        conn: Any = sqlite_connect(tmp_path / "agentd.db")
        sqlite_schema.migrate(conn, sqlite_schema.MIGRATIONS[:-1])
        return conn, lambda: sqlite_schema.migrate(conn)
    conn = pg_connect(str(request.getfixturevalue("pg_url")))
    pg_schema.migrate(conn, pg_schema.MIGRATIONS[:-1])
    return conn, lambda: pg_schema.migrate(conn)


def test_the_upgrade_parks_paused_and_closed_goals_schedules(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    conn, migrate = _old(tmp_path, backend, request)
    try:
        fires = {}
        for name, status, next_fire, last in (
            ("active", "active", 5000.0, 1000.0), ("never computed", "active", None, 1200.0),
            ("never fired", "active", None, None), ("paused", "paused", 4000.0, 900.0),
            ("achieved", "achieved", 4500.0, None),
        ):  # fmt: skip
            g = q.add_goal(conn, title=name, why="upgrade", agent="default", criteria=[],
                           deadline=None)  # fmt: skip
            s = qs.add(conn, g, kind="interval", spec="7200", tz="UTC", misfire="once",
                       misfire_cap=1, max_lateness_s=60, jitter_s=0, now=100.0,
                       next_fire_at=next_fire)  # fmt: skip
            conn.execute("UPDATE schedules SET last_fired_at = ? WHERE schedule_id = ?", (last, s))
            conn.execute("UPDATE goals SET status = ? WHERE goal_id = ?", (status, g))
            fires[name] = (g, s)
        migrate()
        after = {n: qs.get(conn, s).next_fire_at for n, (_, s) in fires.items()}
        created = qs.get(conn, fires["never fired"][1]).created_at
        assert after == {"active": 5000.0, "never computed": 1200.0, "never fired": created,
                         "paused": None, "achieved": None}  # fmt: skip
        paused_goal, paused = fires["paused"]
        q.set_goal_status(conn, paused_goal, GoalStatus.ACTIVE)  # resumed: due from its last fire
        assert qs.get(conn, paused).next_fire_at == 900.0
        indexes = {"inbox_by_status_id", "inbox_waiting", "cadences_quiet"}
        if backend == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'index'"
        else:
            sql = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
        assert indexes <= {str(r[0]) for r in conn.execute(sql).fetchall()}
    finally:
        conn.close()
