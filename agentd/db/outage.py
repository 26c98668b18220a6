"""A shared database's bad minutes as the daemon lives them: a restart, a failover, a partition. The
daemon stays up: the first failure to reach the database is said once (`db.unreachable`, with what
the driver said), every caller meanwhile gets a short StateError instead of a new connection attempt,
the connections are tried again with backoff (half the outage so far, 0.25 to 2 s), and the first success says
`db.reachable` with how long it lasted. The daemon's leases fence its runs if it lasts past them
(daemon/leases.py); status, doctor and systemd's STATUS read `describe()`.

Only a shared backend (PostgreSQL) has outages: a SQLite file that cannot be opened is a fault the
watchdog stops the daemon for (db/safety.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

FIRST_RETRY_S = 0.25
MAX_RETRY_S = 2.0


class Outage:
    """Whether the database at `label` answers, as this process last found it. Thread-safe: the
    writer's thread, the reader's and the loop share one."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.since: float | None = None  # wall time of the first failure, while it lasts
        self.error = ""
        self.failures = 0
        self._retry_at = 0.0  # monotonic: no new connection before this
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: str) -> None:
        """A connection could not be made or was lost: `error` is what the driver said."""
        import structlog  # the daemon's: a CLI command never has an outage

        with self._lock:
            first = self.since is None
            since = self.since = time.time() if self.since is None else self.since
            self.error = error
            self.failures += 1
            # Half the outage so far, within bounds: a restart's second is retried within a
            # quarter second of its end, a long outage every few seconds (no connection storm).
            backoff = min(MAX_RETRY_S, max(FIRST_RETRY_S, (time.time() - since) / 2))
            self._retry_at = time.monotonic() + backoff
        if first:
            structlog.get_logger("agentd.db").warning(
                "db.unreachable", database=self.label, error=error,
                note="the daemon stays up and retries with backoff; its runs are fenced if this "
                "lasts past their lease, and resume by themselves once the database is back",
            )  # fmt: skip

    def reached(self) -> None:
        """A statement succeeded: the outage (if any) is over."""
        if self.since is None:
            return
        import structlog

        with self._lock:
            since, failures = self.since, self.failures
            if since is None:
                return
            self.since, self.error, self.failures, self._retry_at = None, "", 0, 0.0
        structlog.get_logger("agentd.db").warning(
            "db.reachable", database=self.label, outage_s=round(time.time() - since, 1),
            failed_attempts=failures,
        )  # fmt: skip

    def retry_in(self) -> float:
        """Seconds before a new connection may be tried (0: now)."""
        return max(0.0, self._retry_at - time.monotonic()) if self.since is not None else 0.0

    def describe(self) -> str | None:
        """One line for status, doctor and systemd's STATUS; None while the database answers."""
        since = self.since
        if since is None:
            return None
        at = time.strftime("%H:%M:%SZ", time.gmtime(since))
        return (
            f"the database {self.label} is unreachable since {at} "
            f"({time.time() - since:.0f} s): {self.error}; retrying"
        )


class Deadline:
    """One thread's statements timed against `limit_s`: `cut(conn)` (the backend's abort) ends
    one still waiting past it. A single watcher thread, started at first use, looks every
    quarter second: no thread per statement on the hot path."""

    def __init__(self, limit_s: float, cut: Callable[[Any], None], what: str) -> None:
        self.limit_s = limit_s
        self._cut = cut
        self._what = what
        self._current: tuple[Any, float, float] | None = None  # conn, due (monotonic), limit
        self._watcher: threading.Thread | None = None
        # Held to check and cut, and to leave a timed block: a cut lands only on the statement
        # it timed, never on the next one the thread began on the same connection meanwhile.
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def timing(self, conn: Any) -> Iterator[None]:
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch, name="agentd-deadline", daemon=True
            )
            self._watcher.start()
        limit = self.limit_s
        with self._lock:
            self._current = (conn, time.monotonic() + limit, limit)
        try:
            yield
        finally:
            with self._lock:
                self._current = None

    def _watch(self) -> None:
        while True:
            time.sleep(0.25)
            self.check()

    def check(self) -> None:
        """Cut the timed statement if it is past its deadline (the watcher's look)."""
        import structlog

        with self._lock:
            current = self._current
            if current is None or time.monotonic() < current[1]:
                return
            conn, _, limit = current
            self._current = None  # cut once
            structlog.get_logger("agentd.db").error(
                "db.deadline", what=self._what, deadline_s=limit,
                note="the database did not answer: the connection is cut and opened again",
            )  # fmt: skip
            self._cut(conn)
