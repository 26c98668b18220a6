"""What keeps a database from being lost or misused quietly: the "has run" marker and the daemon's
error count (the SQLite version the schema needs and `PRAGMA quick_check` are db/sqlite/safety.py).

A database that vanishes (or is truncated to 0 bytes) must never be replaced by an empty one
behind the operator's back: the marker beside it, written once a database was made here, turns
that into a refusal that says what to do. The marker lives in the home, not in the database, so
it survives what it reports.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentd.db import faults
from agentd.db.outage import Outage
from agentd.errors import StateError

MARKER_SUFFIX = ".has-run"
RESTORE_HINT = faults.RESTORE_HINT


def marker_of(db: Path) -> Path:
    return db.with_name(db.name + MARKER_SUFFIX)


def check_not_lost(db: Path) -> None:
    """Refuse a missing or empty database in a home where agentd has made one before."""
    marker = marker_of(db)
    if not marker.exists():
        return
    try:
        size = db.stat().st_size
    except FileNotFoundError:
        size = -1
    except OSError:
        return  # not ours to judge (permissions): opening it reports the real reason
    if size > 0:
        return
    what = "is missing" if size < 0 else "is empty (0 bytes)"
    raise StateError(
        f"{db} {what}, but agentd has run in this home before ({marker.name} is there): the "
        f"database was lost, and starting over would hide that. Stop agentd, {RESTORE_HINT}; "
        f"or, to start over with an empty database on purpose, delete {marker}"
    )


def mark(db: Path, db_id: str) -> None:
    """Record that this home has a database (once; a failure to write it is not fatal)."""
    marker = marker_of(db)
    if marker.exists():
        return
    text = (
        f"agentd made {db.name} here (database id {db_id}, "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}).\n"
        f"If {db.name} is ever missing or empty, agentd refuses to start over: {RESTORE_HINT}.\n"
        f"Delete this file only to start over with an empty database on purpose.\n"
    )
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # another process wrote it, or a read-only home: the next writer tries again
    with os.fdopen(fd, "w") as f:
        f.write(text)


# What a backend makes of an error met on the database at a path: its fault and the sentence that
# says it, or None when it does not say the database is unwell (not the driver's, a broken
# constraint, a lock wait). db/sqlite/safety.unwell is SQLite's.
Judge = Callable[[BaseException, Path], "tuple[faults.Fault, str] | None"]


class ErrorRate:
    """Errors that say the database at `path` is unwell (corrupt, unreadable, full, gone), counted
    over the last `window_s`; lock waits pass, and a constraint a request broke is that request's
    problem. The daemon's watchdog stops vouching for a process whose database keeps failing;
    `last` says the latest in the operator's words and `note` what to do once it stopped."""

    def __init__(
        self,
        path: Path,
        judge: Judge,
        limit: int = 10,
        window_s: float = 30.0,
        outage: Outage | None = None,
    ) -> None:
        self.path = path
        self.judge = judge
        # A shared database's: losing it is an outage ridden out (db/outage.py), not a failure
        # that ends the daemon.
        self.outage = outage
        self.limit = limit
        self.window_s = window_s
        self._at: collections.deque[float] = collections.deque(maxlen=limit)
        self._lock = threading.Lock()  # readers and the writer run on their own threads
        self.last = ""
        self.fault = faults.Fault.OTHER

    def record(self, error: BaseException) -> None:
        judged = self.judge(error, self.path)
        if judged is None:
            return
        fault, said = judged
        if self.outage is not None and fault in (faults.Fault.CANNOT_OPEN, faults.Fault.READ_ONLY):
            # A lost connection, or one to a server a failover made a standby: reopened at its
            # next use (db/group.py), and failing that is an outage (db/outage.py).
            return
        with self._lock:
            self._at.append(time.monotonic())
            self.last = said
            self.fault = fault

    @property
    def note(self) -> str:
        """What the operator does about the latest error once the daemon stopped for it."""
        return faults.exit_note(self.fault, self.path)

    def failing(self) -> bool:
        with self._lock:
            full = len(self._at) == self.limit
            return full and time.monotonic() - self._at[0] <= self.window_s
