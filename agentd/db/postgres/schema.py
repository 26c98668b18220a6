"""PostgreSQL's schema as ordered migrations, recorded in `schema_migrations` (version, name, the
`breaking` flag, applied_at), each applied in one transaction holding the ledger's table lock
(only a role that may write the ledger takes it; nothing is locked when nothing is pending).

The tables, columns and indexes are SQLite's (db/sqlite/schema.py) in PostgreSQL's types: identity
ids (BY DEFAULT, so a copy can keep its ids), jsonb for JSON, double precision epoch seconds, and
plpgsql for the two triggers. Migration 1 is SQLite's schema version 6 as a whole; what comes after
is appended to both files. A migration is appended, never edited once released.
"""

from __future__ import annotations

from agentd.db.postgres.connection import PostgresConn
from agentd.db.postgres.migrations import ID as ID
from agentd.db.postgres.migrations import MIGRATIONS as MIGRATIONS
from agentd.db.postgres.migrations import TIME as TIME
from agentd.db.postgres.migrations import Migration as Migration
from agentd.errors import StateError

_LEDGER = """
    CREATE TABLE IF NOT EXISTS schema_migrations (
        version     bigint PRIMARY KEY,
        name        text NOT NULL,
        breaking    boolean NOT NULL,
        applied_at  double precision NOT NULL
    )
"""


def version(conn: PostgresConn) -> int:
    """The newest migration applied (0: none, or no agentd schema at all)."""
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
        return 0
    return int(
        conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
    )


def newer_breaking(conn: PostgresConn, known: int) -> list[tuple[int, str]]:
    """Applied migrations past `known` that are breaking: what a daemon must refuse."""
    if version(conn) <= known:
        return []
    rows = conn.execute(
        "SELECT version, name FROM schema_migrations WHERE version > ? AND breaking"
        " ORDER BY version",
        (known,),
    )
    return [(int(v), str(n)) for v, n in rows]


def newer(conn: PostgresConn, known: int) -> list[tuple[int, str, bool]]:
    """Applied migrations past `known` as (version, name, breaking): what another daemon of a
    newer agentd applied under this one."""
    rows = conn.execute(
        "SELECT version, name, breaking FROM schema_migrations WHERE version > ? ORDER BY version",
        (known,),
    )
    return [(int(v), str(n), bool(b)) for v, n, b in rows]


def migrate(conn: PostgresConn, migrations: list[Migration] | None = None) -> int:
    """Apply pending migrations in order, each in one transaction with its ledger row, holding
    the ledger's table lock (waited for, never skipped: two daemons starting at once take
    turns, and the second finds the work done). A database already up to date is only read:
    no lock, so nothing a daemon starts with can be held up by whoever holds one. Returns the
    version reached. Refuses a database holding a breaking migration this agentd does not know;
    a newer compatible one is left as it is."""
    steps = MIGRATIONS if migrations is None else migrations
    if version(conn) >= len(steps):
        _refuse_newer(conn, len(steps))
        return len(steps)
    _create_ledger(conn)
    while True:
        number: int | None = None
        conn.execute("BEGIN")
        try:
            # Only a role that may write the ledger can take this (an advisory lock's key is
            # anyone's who can connect), and it waits for a migrator already at work.
            conn.execute("LOCK TABLE schema_migrations IN EXCLUSIVE MODE")
            current = version(conn)
            _refuse_newer(conn, len(steps))
            if current >= len(steps):
                conn.execute("COMMIT")
                return len(steps)
            number, step = current + 1, steps[current]
            conn.execute(step.sql)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, breaking, applied_at)"
                " VALUES (?, ?, ?, extract(epoch from clock_timestamp())::float8)",
                (number, step.name, step.breaking),
            )
            conn.execute("COMMIT")
        except BaseException as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(e, StateError) or not isinstance(e, Exception):
                raise
            what = "migrating" if number is None else f"migration {number}"
            raise StateError(f"{what} failed and was rolled back: {e}") from e


def _create_ledger(conn: PostgresConn) -> None:
    """The ledger, created once: two daemons creating it at the same instant collide on the
    catalogue's unique names, and the loser finds it there."""
    try:
        conn.execute("BEGIN")
        conn.execute(_LEDGER)
        conn.execute("COMMIT")
    except Exception as e:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
            raise StateError(f"creating the migrations' ledger failed: {e}") from e


def _refuse_newer(conn: PostgresConn, known: int) -> None:
    breaking = newer_breaking(conn, known)
    if breaking:
        names = "; ".join(f"{v}: {n}" for v, n in breaking)
        raise StateError(
            f"database schema holds breaking migrations newer than this agentd knows ({known}):"
            f" {names}; upgrade agentd"
        )
