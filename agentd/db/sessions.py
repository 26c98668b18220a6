"""Queries on web inbox sessions (table `web_sessions`): one row per login, with a random salt
(`key_hash`) the session's signing key is derived from (operator/sessions.py), live while not
ended, not expired, seen within the idle limit and opened with the token in force
(`token_mark`); ended by logout, by the operator, when the token rotates, or when another
program held the daemon's port."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.db.conn import Conn, new_id

COLS = "session_id, client, created_at, seen_at, expires_at, token_mark"
# Parameters: now, the oldest `seen_at` still live (now - idle life), the token's mark.
LIVE = "ended_at IS NULL AND expires_at > ? AND seen_at > ? AND token_mark = ?"
KEEP_ENDED_S = 30 * 86400  # an ended or expired row is deleted this long after it ended


@dataclass(frozen=True)
class WebSession:
    session_id: int
    client: str  # the browser's User-Agent when it logged in (cut short), to tell them apart
    created_at: float
    seen_at: float  # updated at most every few minutes, not at every request
    expires_at: float
    token_mark: str


def _session(r: tuple[Any, ...]) -> WebSession:
    return WebSession(*r)


def open_session(
    c: Conn, *, key_hash: str, token_mark: str, client: str, now: float, expires_at: float
) -> int:
    """A new live session; rows ended or expired long ago are deleted on the way."""
    c.execute(
        "DELETE FROM web_sessions WHERE coalesce(ended_at, expires_at) < ?", (now - KEEP_ENDED_S,)
    )
    cur = c.execute(
        "INSERT INTO web_sessions (key_hash, token_mark, client, created_at, seen_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING session_id",
        (key_hash, token_mark, client, now, now, expires_at),
    )
    return new_id(cur)


def live_by_id(
    c: Conn, session_id: int, token_mark: str, now: float, idle_s: float
) -> tuple[WebSession, str] | None:
    """The live session `session_id` and its salt, or None."""
    row = c.execute(
        f"SELECT {COLS}, key_hash FROM web_sessions WHERE session_id = ? AND {LIVE}",
        (session_id, now, now - idle_s, token_mark),
    ).fetchone()
    return None if row is None else (_session(row[:-1]), str(row[-1]))


def seen(c: Conn, session_id: int, now: float) -> None:
    c.execute("UPDATE web_sessions SET seen_at = ? WHERE session_id = ?", (now, session_id))


def live(c: Conn, token_mark: str, now: float, idle_s: float) -> list[WebSession]:
    """The live sessions, most recently seen first."""
    rows = c.execute(
        f"SELECT {COLS} FROM web_sessions WHERE {LIVE} ORDER BY seen_at DESC, session_id DESC",
        (now, now - idle_s, token_mark),
    )
    return [_session(r) for r in rows]


def end(c: Conn, session_ids: list[int] | None, why: str, now: float) -> int:
    """End the sessions `session_ids` (None: every one not ended yet); returns how many ended."""
    if session_ids is None:
        where, params = "", []
    else:
        where = f" AND {c.dialect.in_list('session_id')}"
        params = [c.dialect.list_param(session_ids)]
    cur = c.execute(
        f"UPDATE web_sessions SET ended_at = ?, ended_why = ? WHERE ended_at IS NULL{where}",
        (now, why, *params),
    )
    return int(cur.rowcount)
