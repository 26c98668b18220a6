"""Web inbox sessions, for the pages and `agentd web sessions`: a login opens one with a fresh
random key (handed to the browser once, stored only as its SHA-256), every page request checks
it, logout ends it; a session also ends when it expires, when the operator revokes it, and when
the token changes (each row keeps a digest of the token it was opened with)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from agentd.clock import SystemClock
from agentd.db import sessions as q
from agentd.db.sessions import WebSession
from agentd.operator.home import HomeStore

__all__ = ["WebSession", "check", "end", "live", "login", "logout", "revoke"]
LIFETIME_S = 30 * 86400  # a login lasts this long at most, used or not
SEEN_EVERY_S = 300.0  # `seen_at` is written at most this often (a page read is not a write)
CLIENT_CHARS = 120


def _now(now: float | None) -> float:
    return SystemClock().now() if now is None else now


def token_mark(token: str) -> str:
    """What a session keeps of the token it was opened with: enough to tell it changed."""
    return hmac.new(token.encode(), b"agentd-web-session-token", hashlib.sha256).hexdigest()[:32]


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def login(store: HomeStore, token: str, client: str, now: float | None = None) -> str:
    """Open a session for a browser that gave `token` (checked by the caller); returns its key."""
    key = secrets.token_urlsafe(32)
    at = _now(now)
    store.write(lambda c: q.open_session(
        c, key_hash=_hash(key), token_mark=token_mark(token), client=client[:CLIENT_CHARS],
        now=at, expires_at=at + LIFETIME_S,
    ))  # fmt: skip
    return key


def check(store: HomeStore, key: str, token: str, now: float | None = None) -> WebSession | None:
    """The live session `key` opens, or None (unknown, ended, expired, or of another token)."""
    at = _now(now)
    found = store.read(lambda c: q.live_by_key(c, _hash(key), token_mark(token), at))
    if found is not None and at - found.seen_at >= SEEN_EVERY_S:
        store.write(lambda c: q.seen(c, found.session_id, at))
    return found


def logout(store: HomeStore, session_id: int, now: float | None = None) -> bool:
    return store.write(lambda c: q.end(c, [session_id], "logout", _now(now))) == 1


def live(store: HomeStore, token: str | None, now: float | None = None) -> list[WebSession]:
    """The live sessions of `token` (None: no token yet, so none), most recently seen first."""
    if token is None:
        return []
    at = _now(now)
    return store.read(lambda c: q.live(c, token_mark(token), at))


def revoke(store: HomeStore, session_ids: list[int] | None, now: float | None = None) -> int:
    """End the sessions `session_ids` (None: all of them); returns how many were live."""
    return store.write(lambda c: q.end(c, session_ids, "revoked", _now(now)))


def end(store: HomeStore, why: str, now: float | None = None) -> int:
    """End every session at once, saying why ("rotated": the token was replaced)."""
    return store.write(lambda c: q.end(c, None, why, _now(now)))
