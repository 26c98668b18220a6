"""A small TCP proxy for tests (and bench/) between daemons and a PostgreSQL cluster's unix socket: what
a network does to a database connection on a bad day, on demand.

- `up` (the start): bytes flow both ways.
- `reset()`: every open connection ends with a TCP RST, and new ones are reset at once (a server
  or a route gone: "server closed the connection unexpectedly", "connection refused").
- `blackhole()`: connections stay open and nothing flows either way; new ones are accepted and get
  nothing (a stalled server, a partition with TCP up: a statement waits for an answer forever).
- `resume()`: back to `up` for new connections (those reset stay gone; those blackholed stay
  silent, as a peer that lost its state would leave them).

Threads, no asyncio: `Proxy(target).start()` gives `port`; `close()` ends it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from pathlib import Path


def _rst(sock: socket.socket) -> None:
    """Close with a reset instead of a FIN (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class Proxy:
    def __init__(self, target: Path) -> None:
        self.target = target  # a unix socket
        self.mode = "up"
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._pairs: list[tuple[socket.socket, socket.socket | None]] = []
        self._lock = threading.Lock()
        self._resets = 0  # reset() calls: a connection accepted before one is reset by it
        self._closed = False

    def start(self) -> Proxy:
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def url(self, dbname: str, user: str = "agentd") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def reset(self) -> None:
        with self._lock:
            self.mode = "reset"
            self._resets += 1
            pairs, self._pairs = self._pairs, []
        for client, server in pairs:
            _rst(client)
            if server is not None:
                _rst(server)

    def blackhole(self) -> None:
        self.mode = "blackhole"

    def resume(self) -> None:
        self.mode = "up"

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                mode, resets = self.mode, self._resets
            if mode == "reset":
                _rst(client)
                continue
            server = None
            if mode != "blackhole":  # blackholed: held open, never answered
                try:
                    server = self._dial()
                except OSError:
                    _rst(client)
                    continue
            with self._lock:
                # A reset() since the accept took the pairs before this one: it is reset too,
                # never left open with no pump (silent, as if blackholed).
                kept = self._resets == resets
                if kept:
                    self._pairs.append((client, server))
            if not kept:
                _rst(client)
                if server is not None:
                    _rst(server)
                continue
            if server is None:
                continue
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _dial(self) -> socket.socket:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.connect(str(self.target))
        except OSError:
            server.close()
            raise
        return server

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                if self.mode != "blackhole":
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                return
            while self.mode == "blackhole" and not self._closed:
                threading.Event().wait(0.05)  # nothing flows; the bytes wait (a stalled peer)
            if self.mode == "reset":
                return
            try:
                dst.sendall(data)
            except OSError:
                return
