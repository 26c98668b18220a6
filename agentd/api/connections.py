"""The API's connections, held within bounds: a client of the port cannot stall the daemon.

Each listener (the unix socket, the port) holds at most its own number of connections: past it,
a stranger's connection is closed to make room (one that has not yet proven itself: no request
on it carried the token, a session's key or a hook's signature), owing its request first, then
the oldest one between requests, else the new one is answered 503 and closed, so a flood of the
port never takes the CLI's socket or the daemon's descriptors. Strangers still owing a request
(silent, half a head, a body announced and not sent) are also held to a quarter of the limit:
the oldest gives way. A request's head and body must arrive within `request_timeout_s` of the
connection (or of the previous answer), and a refused request (4xx) closes its connection.
Whatever authenticates a request calls agentd/web/trust.py `vouch`: no stranger any more. This is
uvicorn's h11 protocol, subclassed: it has a keep-alive timeout but none for a request that never completes,
and its `limit_concurrency` only answers 503 to requests, leaving idle connections open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any, ClassVar

import h11
import structlog
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from agentd.web import trust

log = structlog.get_logger("agentd.api")

BODY = b"too many connections: try again"
FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)
)
REFUSE_PER_TURN = 16  # connections one accept() call may refuse before it lets the loop go on
CLOSING_MAX = 16  # evicted connections whose descriptors may wait for the loop at once
WAITING = (h11.IDLE, h11.SEND_BODY)  # the client's states while its request has not all come
# A stranger connected this recently is not counted against the strangers' quarter: a burst of
# honest senders (50 at once) is still sending its requests, a slow loris has been sitting.
STRANGER_GRACE_S = 0.5


class Listener:
    """The connections one listener holds (oldest first), those accepted whose protocol has yet
    to start, how many it may hold in all, and how many strangers owing a request among them."""

    def __init__(self, name: str, limit: int, *, trusted: bool = False) -> None:
        self.name = name
        self.limit = limit
        self.trusted = trusted  # every connection proved itself by connecting (the 0600 socket)
        self.strangers_limit = max(1, limit // 4)
        self.held: dict[Bounded, None] = {}  # insertion-ordered: the oldest first
        self.pending: dict[int, socket.socket] = {}  # by descriptor: accepted, not yet made
        self.closing = 0  # evicted, their descriptors not yet closed by the loop

    def admit(self, conn: socket.socket) -> bool:
        """Whether to keep `conn`, just accepted: room is made by closing the oldest connection
        between requests; False (refuse it) when every one held is busy with a request."""
        # A connection asyncio failed to wrap was closed by it: its descriptor is not ours.
        self.pending = {fd: s for fd, s in self.pending.items() if s.fileno() == fd}
        if len(self.held) + len(self.pending) >= self.limit and not self._evict():
            log.warning("api.connections_full", listener=self.name, limit=self.limit,
                        note="a new connection was refused: none held could make room")  # fmt: skip
            return False
        if not self.trusted:  # a sender's fresh connection has a moment to send its request
            now = asyncio.get_running_loop().time()
            owing = [c for c in self.held if c.stranger() and c.owing(now - STRANGER_GRACE_S)]
            if len(owing) >= self.strangers_limit:
                self._close(owing[0], "strangers owing a request are held to a quarter")
        self.pending[conn.fileno()] = conn
        return True

    def _evict(self) -> bool:
        if self.closing >= CLOSING_MAX:
            return False
        strangers = [c for c in self.held if c.stranger()]
        owing = [c for c in strangers if c.owing()]
        idle = [c for c in self.held if c.between_requests()]
        victim = next(iter(owing or strangers or idle), None)
        if victim is None:
            return False
        self._close(victim, "strangers, then the oldest idle, are closed to admit new ones")
        return True

    def _close(self, conn: Bounded, note: str) -> None:
        del self.held[conn]
        self.closing += 1
        conn.evicted = True
        _drop(conn.transport)  # its descriptor is closed on the loop's next turn
        log.warning("api.connections_full", listener=self.name, limit=self.limit, note=note)

    def arrived(self, conn: Bounded, fd: int) -> None:
        self.pending.pop(fd, None)
        self.held[conn] = None

    def left(self, conn: Bounded) -> None:
        if conn.evicted:  # no longer held since it was evicted
            self.closing -= 1
        else:
            self.held.pop(conn, None)


class Gate(socket.socket):
    """A listening socket whose `accept()` closes at once what its listener will not hold, so
    a refused connection never costs a descriptor past the call (asyncio accepts in bursts of
    the backlog's length before any protocol runs: a cap there would come too late)."""

    listener: Listener

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(REFUSE_PER_TURN):
            conn, address = super().accept()  # BlockingIOError when none waits: asyncio stops
            if self.listener.admit(conn):
                return conn, address
            _refuse(conn)
        raise BlockingIOError  # the rest wait in the backlog for the loop's next turn


def gate(listener: Listener, family: socket.AddressFamily) -> Gate:
    """A new stream socket for `listener` (bind and listen it as any other). A TCP one names its
    protocol: asyncio sets TCP_NODELAY only on a socket whose `proto` is IPPROTO_TCP, and without
    it an answer sent as headers then body waits for the client's delayed ACK (~40 ms each)."""
    proto = 0 if family == socket.AF_UNIX else socket.IPPROTO_TCP
    sock = Gate(family, socket.SOCK_STREAM, proto)
    sock.listener = listener
    return sock


def _drop(transport: asyncio.Transport) -> None:
    """Close now: politely (FIN) when nothing is left to send, else at once (RST), so a client
    that does not read cannot keep the descriptor by leaving our answer in the buffer."""
    if transport.get_write_buffer_size():
        transport.abort()
    else:
        transport.close()


def _refuse(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(FULL)  # a few bytes into an empty buffer: sent now or never
    conn.close()


class Limits:
    """Per listener, the connections held; and the time a request has to arrive."""

    def __init__(self, socket_limit: int, port_limit: int, request_timeout_s: float) -> None:
        self.socket = Listener("socket", socket_limit, trusted=True)
        self.port = Listener("port", port_limit)
        self.request_timeout_s = request_timeout_s

    def listener(self, sock: Any) -> Listener:
        return self.socket if sock.family == socket.AF_UNIX else self.port


class Bounded(H11Protocol):
    """uvicorn's h11 protocol within `limits` (set on the subclass `protocol()` makes)."""

    limits: ClassVar[Limits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listener: Listener | None = None
        self.evicted = False  # closed to make room for a newer connection
        self.vouched = False  # a request on it proved itself (`vouch`)
        self.since = 0.0  # the loop's time it connected
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        self._listener = self.limits.listener(sock)
        self._listener.arrived(self, sock.fileno())
        self.since = asyncio.get_running_loop().time()
        super().connection_made(transport)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._listener is not None:
            self._listener.left(self)
        self._stop_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        # Called when data came and when an answer is complete (the next request may start).
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not cycle:  # a new request: its task runs
            self.cycle.scope[trust.VOUCH] = self._vouch  # type: ignore[literal-required]  # next turn
        self._watch()

    def _vouch(self) -> None:
        self.vouched = True

    def stranger(self) -> bool:
        """No request on it has proven itself, and its listener does not vouch for it."""
        return not self.vouched and not (self._listener is not None and self._listener.trusted)

    def owing(self, connected_before: float | None = None) -> bool:
        """The client owes a request, or the rest of one (it is not being answered); with
        `connected_before` (the loop's time), only if it connected before then."""
        if connected_before is not None and self.since > connected_before:
            return False
        return self.conn.their_state in WAITING and not self.transport.is_closing()

    def between_requests(self) -> bool:
        """No request is being answered: none has begun (its head has not all come) or the last
        one is answered. A request owing its body is busy (its deadline ends it)."""
        return self.cycle is None or self.cycle.response_complete

    def _watch(self) -> None:
        """Arm the deadline when the client owes a request (or the rest of one); disarm it as
        soon as the request has all come (a long answer, an event stream, is never cut)."""
        owed = self.owing()
        if owed and self._deadline is None:
            self._deadline = self.loop.call_later(self.limits.request_timeout_s, self._expired)
        elif not owed:
            self._stop_deadline()

    def _expired(self) -> None:
        self._deadline = None
        if self.conn.their_state in WAITING and not self.transport.is_closing():
            _drop(self.transport)  # nothing owed to a client that never finished asking

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def protocol(limits: Limits) -> type[Bounded]:
    """The protocol class for one server (uvicorn's `Config(http=...)`), bound to `limits`."""
    return type("BoundedH11", (Bounded,), {"limits": limits})


def closing_refusals(app: ASGIApp) -> ASGIApp:
    """`app` whose refusals (4xx: no token, an untrusted Host, not found) close the connection,
    so a client without a token cannot keep one open by asking again and again."""

    async def closing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                MutableHeaders(scope=message)["connection"] = "close"
            await send(message)

        await app(scope, receive, send_closing)

    return closing


class _ToLog(logging.Handler):
    """uvicorn's warnings ("Invalid HTTP request received.", one per bad request) as agentd's
    log lines, which hold back repeats (agentd/log.py), instead of stderr's one per request."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            extra = {"exc_info": record.exc_info} if record.exc_info else {}
            structlog.get_logger(record.name).log(record.levelno, record.getMessage(), **extra)
        except Exception:  # a log line must never break the daemon
            self.handleError(record)


def route_uvicorn_log() -> None:
    """Send uvicorn's warnings and errors through agentd's log (idempotent)."""
    lib = logging.getLogger("uvicorn.error")
    lib.handlers = [_ToLog()]
    lib.setLevel(logging.WARNING)  # its info lines (started, shutting down) are noise here
    lib.propagate = False
