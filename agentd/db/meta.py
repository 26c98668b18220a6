"""The `meta` table (cursors, the database's random id) and journal retention."""

from __future__ import annotations

import secrets
from typing import Any

from agentd.db import stamp
from agentd.db.conn import Conn


def get_meta(c: Conn, key: str, default: str = "") -> str:
    row = c.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return default if row is None else str(row[0])


def set_meta(c: Conn, key: str, value: str) -> None:
    memo = getattr(c, "memo", None)  # a value read once per transaction (db/stamp.py) changes
    if memo is not None:
        memo.pop(key, None)
    c.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def db_id(c: Conn) -> str:
    """This database's random id, made on first use: idempotency keys carry it, so two homes
    (staging and prod, a re-initialised home) never send the same key to one API."""
    value = get_meta(c, "db_id")
    if not value:
        value = secrets.token_hex(4)
        set_meta(c, "db_id", value)
    return value


# Rows of a table (for the journal: runs' steps) one prune deletes at most: one short transaction
# of a long prune, well within the statement timeout, with the writers queued behind it briefly.
PRUNE_CHUNK = 500


def _chunk(c: Conn, table: str, key: str, where: str, params: tuple[Any, ...], limit: int) -> int:
    """Delete at most `limit` rows of `table` matching `where`, oldest `key` first."""
    return int(
        c.execute(
            f"DELETE FROM {table} WHERE {key} IN"
            f" (SELECT {key} FROM {table} WHERE {where} ORDER BY {key} LIMIT ?)",
            (*params, limit),
        ).rowcount
    )


def prune(c: Conn, older_than: float, *, limit: int = PRUNE_CHUNK) -> int:
    """Journal retention, one chunk of it: drop the steps of runs that finished before the
    horizon (the run row keeps its status and summary), world snapshots older than it — except
    those an unfinished run still refers to and each agent's latest —, events and closed inbox
    items older than it, and rate-limit entries older than a day of the home's time (limits look
    back an hour). At most `limit` rows of each table (the steps of at most `limit` runs): the
    daemon repeats it, each chunk its own transaction, until one drops nothing
    (Store.write_chunks), so no prune outlasts the statement timeout or holds writers long.
    Returns the rows gone.

    One daemon prunes at a time (the "retention" singleton, taken first), however many share
    the database: the others wait for its chunk and then find the work done."""
    c.dialect.singleton(c, "retention")
    seen = c.dialect.jint("s.data", "snapshot_id")  # a snapshot an unfinished run observed
    c.execute("DELETE FROM rate_log WHERE at < ?", (stamp.now(c) - 86400,))  # a day's: few
    steps = c.execute(
        "DELETE FROM steps WHERE run_id IN (SELECT s.run_id FROM steps s"
        " JOIN runs r ON r.run_id = s.run_id"
        " WHERE r.status IN ('succeeded', 'failed', 'cancelled') AND r.updated_at < ?"
        " ORDER BY s.run_id LIMIT ?)",
        (older_than, limit),
    ).rowcount
    world = _chunk(
        c, "world", "snapshot_id",
        "taken_at < ? AND snapshot_id NOT IN (SELECT max(snapshot_id) FROM world GROUP BY agent)"
        f" AND snapshot_id NOT IN (SELECT {seen} FROM steps s"
        " JOIN runs r ON r.run_id = s.run_id WHERE r.status IN ('running', 'waiting')"
        f" AND s.kind = 'observe' AND {seen} IS NOT NULL)",
        (older_than,), limit,
    )  # fmt: skip
    # Events and closed inbox items age out too; the newest event stays (cursors point at it),
    # and nothing a live run waits on or was granted is touched.
    events = _chunk(
        c, "events", "event_id",
        "created_at < ? AND event_id < (SELECT max(event_id) FROM events)", (older_than,), limit,
    )  # fmt: skip
    items = _chunk(
        c, "inbox", "item_id",
        "resolved_at < ? AND status NOT IN ('open', 'approved') AND (run_id IS NULL OR run_id"
        " NOT IN (SELECT run_id FROM runs WHERE status IN ('running', 'waiting')))",
        (older_than,), limit,
    )  # fmt: skip
    checkins = _chunk(  # finished check-ins age out like finished runs' journals
        c, "checkins", "checkin_id",
        "status IN ('skipped', 'missed', 'done', 'failed') AND coalesce(completed_at, fired_at) < ?",
        (older_than,), limit,
    )  # fmt: skip
    return int(steps) + world + events + items + checkins


LOADED_CONFIG_SHA256 = "loaded_config_sha256"


def set_loaded_config(c: Conn, sha256_hex: str) -> None:
    """Record the sha256 of the config file bytes the daemon loaded (at start and every reload):
    `agentd doctor` compares it with the file on disk to say a reload is pending."""
    set_meta(c, LOADED_CONFIG_SHA256, sha256_hex)


def loaded_config(c: Conn) -> str:
    """The sha256 hex of the config the daemon last loaded, or "" when none was recorded."""
    return get_meta(c, LOADED_CONFIG_SHA256)
