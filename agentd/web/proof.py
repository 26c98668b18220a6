"""The daemon proves itself before a page signs anything for it, and a page's request is signed,
never keyed. A page holds its session's signing key (operator/sessions.py) and never sends it:
for each request it first asks `GET /prove?session=ID&nonce=N` (N: its own fresh random value),
and only when the answer's `proof` is the HMAC of N and the answer's one-use `challenge` under
that key — which only agentd, holding the token, can derive — does it send the request with
`X-Agentd-Auth: ID.CHALLENGE.MAC`, the MAC over the method, the path and the challenge. A program
that took the port while agentd was down cannot prove itself, so it gets nothing; a request it
saw (or a copy of it) names a challenge already spent, or one for another path."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

CHALLENGE_TTL_S = 60.0  # a challenge not used within this is void
MAX_OPEN = 4096  # challenges waiting for their request; the oldest is dropped beyond this
NONCE = re.compile(r"[0-9a-f]{16,64}")
AUTH = re.compile(r"([0-9]{1,18})\.([A-Za-z0-9_-]{16,64})\.([0-9a-f]{64})")


def sign(key: str, text: str) -> str:
    """HMAC-SHA256 of `text` under `key` (the session's 64 hex digits), as the page computes it."""
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def daemon_proof(key: str, nonce: str, challenge: str) -> str:
    return sign(key, f"agentd-daemon\n{nonce}\n{challenge}")


def request_mac(key: str, method: str, target: str, challenge: str) -> str:
    return sign(key, f"agentd-client\n{method}\n{target}\n{challenge}")


@dataclass(frozen=True)
class Signed:
    """What a request's `X-Agentd-Auth` (or a form's first field, `_auth`) says."""

    session_id: int
    challenge: str
    mac: str

    @classmethod
    def parse(cls, given: str | None) -> Signed | None:
        found = None if given is None else AUTH.fullmatch(given.strip())
        return None if found is None else cls(int(found[1]), found[2], found[3])

    def valid(self, key: str, method: str, target: str) -> bool:
        return hmac.compare_digest(self.mac, request_mac(key, method, target, self.challenge))


class Challenges:
    """The challenges handed out and not yet used, each for one session, used once."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def issue(self, session_id: int) -> str:
        challenge = secrets.token_urlsafe(18)
        self._open[challenge] = (session_id, time.monotonic() + CHALLENGE_TTL_S)
        while len(self._open) > MAX_OPEN:
            self._open.popitem(last=False)
        return challenge

    def take(self, challenge: str, session_id: int) -> bool:
        """Whether `challenge` was handed out for `session_id` and is still good; never again."""
        found = self._open.pop(challenge, None)
        return found is not None and found[0] == session_id and time.monotonic() < found[1]


def target(raw_path: bytes, query: bytes) -> str:
    """The request's path and query as the page's script signed them (as sent, not decoded)."""
    path = raw_path.decode("latin-1")
    return f"{path}?{query.decode('latin-1')}" if query else path
