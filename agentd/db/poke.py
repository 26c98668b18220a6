"""The writer's side of the poke: after a commit, tell the home's daemon to look now.

Every SyncStore commit (the CLI, the web inbox, a test arranging rows) pokes the daemon over the
unix socket its control API listens on (agentd/api/server.py), so the daemon's own database scan
can be a slow safety net. Best-effort and silent: the write is the truth, and a daemon that is
down (or its socket stale) finds it at its next scan. A short timeout keeps a stuck daemon from
stalling the CLI.

`ask` is the reading side: one JSON GET over the same socket with the home's token, for the CLI
and doctor to learn what the running daemon actually serves (the config on disk may differ).
"""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from typing import Any

POKE_TIMEOUT_S = 0.25
# The home's token (`api.token`) is 43 characters (32 random bytes); one shorter than this was not
# written by agentd and could be guessed over the loopback port: refused, never used.
MIN_TOKEN_CHARS = 32
API_SOCK_NAME = "api.sock"  # in the home, beside the database
REQUEST = (
    b"POST /poke HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)


def poke(sock_path: Path, timeout_s: float = POKE_TIMEOUT_S) -> bool:
    """True when the poke was handed to a listening daemon; False (silently) otherwise.

    The answer is not awaited: the writer may be a thread of the daemon itself, or a test in
    the daemon's own event loop, and the request sits in the socket's buffer until it is read.
    """
    if not sock_path.exists():
        return False
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(sock_path))
        s.sendall(REQUEST)
        return True
    return False


ASK_TIMEOUT_S = 2.0


def _unix_socket(path: Path, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def ask(sock_path: Path, path: str, token: str, timeout_s: float = ASK_TIMEOUT_S) -> Any:
    """GET `path` from the daemon; None when no daemon answers on the socket (down, stale socket,
    a daemon from before this endpoint). Never raises for an unreachable daemon."""
    import http.client  # it imports ssl and email: paid only by a command that asks the daemon

    if not sock_path.exists():
        return None
    conn = http.client.HTTPConnection("localhost", timeout=timeout_s)
    try:
        conn.sock = _unix_socket(sock_path, timeout_s)  # the request goes over the home's socket
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            return None
        return json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def strong_token(value: str) -> bool:
    return len(value) >= MIN_TOKEN_CHARS and value.isprintable() and " " not in value
