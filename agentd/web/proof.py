"""The daemon proves itself before a page signs anything for it, and a page's request is signed,
never keyed. A page holds its session's signing key (operator/sessions.py) and never sends it:
for each request it first asks `GET /prove?session=ID&nonce=N` (N: its own fresh random value),
and only when the answer's `proof` is the HMAC of N and the answer's one-use `challenge` under
that key — which only agentd, holding the token, can derive — does it send the request with
`X-Agentd-Auth: ID.CHALLENGE.MAC`, the MAC over the method, the path and the challenge. A program
that took the port while agentd was down cannot prove itself, so it gets nothing; a request it
saw (or a copy of it) names a challenge already spent, or one for another path."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

CHALLENGE_TTL_S = 60.0  # a challenge not used within this is void
HEAD_CHARS = 28  # a challenge: 16 random characters, its deadline (12 hex digits), its tag (22)
CHALLENGE_CHARS = HEAD_CHARS + 22
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
    """The challenges this daemon hands out, each for one session and used once. A challenge
    carries its own proof of origin (a random part, its deadline, and a tag: their HMAC with the
    session's id under a secret of this process), so nothing is kept for one handed out: however
    many `/prove` hands out to anyone, none pushes out the one a page is about to use. Only a
    challenge used by a valid signature is remembered, until its deadline, so it is never used
    again."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        self._spent: dict[str, float] = {}  # challenge -> deadline, in the order they were used

    def _tag(self, session_id: int, head: str) -> str:
        mac = hmac.new(self._secret, f"{session_id}\n{head}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:16]).decode().rstrip("=")

    def issue(self, session_id: int) -> str:
        deadline = int((time.monotonic() + CHALLENGE_TTL_S) * 1000)
        head = f"{secrets.token_urlsafe(12)}{deadline:012x}"
        return head + self._tag(session_id, head)

    def good(self, challenge: str, session_id: int) -> bool:
        """Whether `challenge` was handed out for `session_id`, is in time and not used yet."""
        head, tag = challenge[:HEAD_CHARS], challenge[HEAD_CHARS:]
        if len(challenge) != CHALLENGE_CHARS or challenge in self._spent:
            return False
        if not hmac.compare_digest(tag, self._tag(session_id, head)):
            return False
        return time.monotonic() * 1000 < int(head[-12:], 16)

    def take(self, challenge: str, session_id: int) -> bool:
        """`good`, and then never again (call it once the request's signature is checked)."""
        if not self.good(challenge, session_id):
            return False
        now = time.monotonic()
        while self._spent:  # those past their deadline go, the oldest used first
            old, deadline = next(iter(self._spent.items()))
            if deadline > now:
                break
            del self._spent[old]
        self._spent[challenge] = int(challenge[HEAD_CHARS - 12 : HEAD_CHARS], 16) / 1000
        return True


def target(raw_path: bytes, query: bytes) -> str:
    """The request's path and query as the page's script signed them (as sent, not decoded)."""
    path = raw_path.decode("latin-1")
    return f"{path}?{query.decode('latin-1')}" if query else path
