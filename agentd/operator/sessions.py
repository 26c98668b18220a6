"""Web inbox sessions, for the pages and `agentd web sessions`: a login opens one with a random
salt, and hands the browser the session's signing key, derived from the token and that salt (a
copy of the database alone derives nothing). The key never travels again: the page asks the
daemon to prove it holds it, then signs each request with it (web/proof.py). Logout ends a
session; so do expiry, idleness, the operator, and a change of the token (each row keeps a
digest of the token it was opened with)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from agentd.clock import SystemClock
from agentd.db import sessions as q
from agentd.db.sessions import WebSession
from agentd.operator.home import HomeStore

__all__ = ["WebSession", "check", "end", "ends_at", "live", "login", "logout", "revoke", "used"]
LIFETIME_S = 7 * 86400  # a login lasts this long at most, used or not
# A session not used for this long is over: a browser left logged in for days is a key
# lying around, and a stolen one ages out while its owner is away.
IDLE_S = 12 * 3600.0
SEEN_EVERY_S = 300.0  # `seen_at` is written at most this often (a page read is not a write)
CLIENT_CHARS = 120


def _now(now: float | None) -> float:
    return SystemClock().now() if now is None else now


def token_mark(token: str) -> str:
    """What a session keeps of the token it was opened with: enough to tell it changed."""
    return hmac.new(token.encode(), b"agentd-web-session-token", hashlib.sha256).hexdigest()[:32]


def signing_key(token: str, salt: str) -> str:
    """A session's signing key (64 hex digits): only the token's holder derives it from the salt."""
    return hmac.new(
        token.encode(), b"agentd-web-session\0" + salt.encode(), hashlib.sha256
    ).hexdigest()


def login(store: HomeStore, token: str, client: str, now: float | None = None) -> str:
    """Open a session for a browser that gave `token` (checked by the caller); returns what the
    page keeps: `SESSION_ID.SIGNING_KEY`."""
    salt = hashlib.sha256(secrets.token_bytes(32)).hexdigest()
    at = _now(now)
    session_id = store.write(lambda c: q.open_session(
        c, key_hash=salt, token_mark=token_mark(token), client=client[:CLIENT_CHARS],
        now=at, expires_at=at + LIFETIME_S,
    ))  # fmt: skip
    return f"{session_id}.{signing_key(token, salt)}"


def check(
    store: HomeStore, session_id: int, token: str, now: float | None = None
) -> tuple[WebSession, str] | None:
    """The live session `session_id` and its signing key, or None (unknown, ended, expired,
    idle too long, or of another token)."""
    at = _now(now)
    found = store.read(lambda c: q.live_by_id(c, session_id, token_mark(token), at, IDLE_S))
    return None if found is None else (found[0], signing_key(token, found[1]))


def ends_at(session: WebSession) -> float:
    """When `session` ends if nobody uses it again: its idle limit, or its life's end if sooner
    (what the daemon checks: `seen_at` as recorded, however stale)."""
    return min(session.expires_at, session.seen_at + IDLE_S)


def used(store: HomeStore, session: WebSession, now: float | None = None) -> None:
    """`session` signed a request: it is seen (written now and then: a read is not a write)."""
    at = _now(now)
    if at - session.seen_at >= SEEN_EVERY_S:
        store.write(lambda c: q.seen(c, session.session_id, at))


def logout(store: HomeStore, session_id: int, now: float | None = None) -> bool:
    return store.write(lambda c: q.end(c, [session_id], "logout", _now(now))) == 1


def live(store: HomeStore, token: str | None, now: float | None = None) -> list[WebSession]:
    """The live sessions of `token` (None: no token yet, so none), most recently seen first."""
    if token is None:
        return []
    at = _now(now)
    return store.read(lambda c: q.live(c, token_mark(token), at, IDLE_S))


def revoke(store: HomeStore, session_ids: list[int] | None, now: float | None = None) -> int:
    """End the sessions `session_ids` (None: all of them); returns how many were live."""
    return store.write(lambda c: q.end(c, session_ids, "revoked", _now(now)))


def end(store: HomeStore, why: str, now: float | None = None) -> int:
    """End every session at once, saying why ("rotated": the token was replaced)."""
    return store.write(lambda c: q.end(c, None, why, _now(now)))
