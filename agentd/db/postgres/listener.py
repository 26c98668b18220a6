"""The LISTEN side of wake-ups on a shared PostgreSQL store (DESIGN §7).

A thread of its own holds one autocommit connection that LISTENs on `agentd_wake` and calls
`on_wake` (thread-safe: the daemon hands in a `call_soon_threadsafe`) when a notification arrives,
several at once coalesced into one call, and at most one call every WAKE_GAP_S: any role that can
connect may NOTIFY the channel, and a flood costs the daemon no more than ten looks a second (the
notifications are still read, so the server's queue never backs up). Nothing depends on it: the
daemon's timers and safety scan go on. A broken connection — the server restarted, the backend
was terminated, a pooler in the way — is reopened with a growing pause, and every (re)connect
calls `on_wake` once, because what was sent while nobody listened is gone. A liveness probe every
few seconds finds a connection that died silently. Between them the thread sleeps in one epoll
wait on the connection's socket and a wake-up socket `stop` writes to: psycopg's own wait wakes ten
times a second, which was most of an idle daemon's CPU on PostgreSQL (issue 35).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from agentd.db.postgres.connection import NETWORK_SETTINGS, label, redact
from agentd.db.wake import CHANNEL

PROBE_S = 5.0  # a quiet connection is probed this often (SELECT 1)
MAX_BACKOFF_S = 30.0
WAKE_GAP_S = 0.1  # at most one wake in this long, however many notifications arrive
DRAIN = 10_000  # notifications read in one go before the loop looks at its clock again


class Listener:
    """LISTENs on `agentd_wake` at `url` and calls `on_wake` on notifications and reconnects.

    `log` reports connects (`info`) and failures (`warning`): the daemon passes its logger;
    `connected`, `notifications`, `connects` and `backend_pid` say how it fares (doctor, tests)."""

    def __init__(
        self,
        url: str,
        on_wake: Callable[[], None],
        log: Any = None,
    ) -> None:
        self.url = url
        self.on_wake = on_wake
        self.log = log if log is not None else _Quiet()
        self.connected = threading.Event()
        self.notifications = 0
        self.connects = 0
        self.backend_pid: int | None = None
        self.last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping, self._told = socket.socketpair()  # `stop` wakes the select() at once

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="agentd-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):  # closed: stopped already
            self._told.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is None or not self._thread.is_alive():
            self._stopping.close()
            self._told.close()

    def _main(self) -> None:
        backoff_s = 0.5
        said = False  # the loss is said once, not at every attempt of an outage
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self.url, autocommit=True, application_name="agentd-listener",
                    **NETWORK_SETTINGS,
                ) as conn:  # fmt: skip
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.backend_pid = conn.info.backend_pid
                    self.connects += 1
                    self.connected.set()
                    self.log.info(
                        "listener.connected", database=label(self.url), connects=self.connects
                    )
                    self.on_wake()  # what was notified while nobody listened is gone: look now
                    backoff_s, said = 0.5, False
                    self._listen(conn)
            except Exception as e:  # the thread never dies: the scheduler trusts `connected`
                self.connected.clear()
                self.last_error = redact(
                    (str(e).strip().splitlines() or [type(e).__name__])[0], self.url
                )
                if not said:
                    self.log.warning("listener.lost", error=self.last_error, retry_in_s=backoff_s)
                    said = True
                self._stop.wait(backoff_s)
                backoff_s = min(MAX_BACKOFF_S, backoff_s * 2)
        self.connected.clear()

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        with selectors.DefaultSelector() as sel:  # epoll: any fd number (select() stops at 1024)
            sel.register(conn.fileno(), selectors.EVENT_READ)
            sel.register(self._stopping.fileno(), selectors.EVENT_READ)
            self._wait(conn, sel)

    def _wait(self, conn: psycopg.Connection[Any], sel: selectors.BaseSelector) -> None:
        probed = woke = time.monotonic()
        owed = False  # notifications arrived that no wake has answered yet
        backlog = False  # a probe's round trip may have read notifications into psycopg's backlog
        while not self._stop.is_set():
            now = time.monotonic()
            wait_s = max(0.0, probed + PROBE_S - now)
            if owed:
                wait_s = min(wait_s, max(0.0, woke + WAKE_GAP_S - now))
            if backlog:  # the socket may be empty while psycopg holds some: no wait
                wait_s, backlog = 0.0, False
            sel.select(wait_s)
            if self._stop.is_set():
                return
            # What arrived (also what a probe's round trip read into psycopg's backlog).
            got = sum(1 for _ in conn.notifies(timeout=0.0, stop_after=DRAIN))
            if got:
                self.notifications += got
                owed, probed = True, time.monotonic()
            now = time.monotonic()
            if owed and now - woke >= WAKE_GAP_S:
                self.on_wake()
                woke, owed = now, False
            elif not got and now - probed >= PROBE_S:
                conn.execute("SELECT 1")  # raises on a connection that died without a word
                probed, backlog = time.monotonic(), True


class _Quiet:
    """A logger that says nothing (tests, callers without one)."""

    def info(self, event: str, **values: Any) -> None:
        pass

    def warning(self, event: str, **values: Any) -> None:
        pass
