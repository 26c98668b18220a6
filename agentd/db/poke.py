"""The writer's side of the poke: after a commit, tell the home's daemon to look now.

Every SyncStore commit (the CLI, the web inbox, a test arranging rows) pokes the daemon over the
unix socket its control API listens on (agentd/api/server.py), so the daemon's own database scan
can be a slow safety net. Best-effort and silent: the write is the truth, and a daemon that is
down (or its socket stale) finds it at its next scan. A short timeout keeps a stuck daemon from
stalling the CLI.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

POKE_TIMEOUT_S = 0.25
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
