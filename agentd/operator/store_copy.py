"""Moving a home's state into PostgreSQL (`agentd store copy --to URL`): the refusals that keep the
copy whole — no daemon may serve the home meanwhile (its lock is held for the copy, so none can
start), the home must still keep its state in its SQLite file — then the copy itself
(agentd/db/copy.py), and what the operator does next.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator

from agentd.config import Paths
from agentd.config.where import SCHEMES, home_store_url
from agentd.db import copy as db_copy
from agentd.db import safety
from agentd.db.backend import open_backend
from agentd.errors import DaemonRunning, Refused, StateError, UsageError

TableCopy = db_copy.TableCopy
CopyReport = db_copy.CopyReport
LOCK_TRIES = 20  # × 25 ms: a command probing the lock (daemon_pid) holds it for microseconds


def check_url(url: str, option: str = "--to") -> str:
    """A PostgreSQL URL, or a usage error that shows one."""
    url = url.strip()
    if not url.startswith(SCHEMES):
        raise UsageError(
            f"{option} must be a PostgreSQL URL such as postgresql://agentd@db.example/agentd"
            f" (got {url.split(':', 1)[0]!r}...)"
        )
    return url


def label(url: str) -> str:
    """The URL as messages show it: without its password."""
    from agentd.db.postgres.connection import label as without_password

    return without_password(url)


@contextlib.contextmanager
def no_daemon(paths: Paths) -> Iterator[None]:
    """Hold the home's lock (the one `agentd serve` takes) for the copy: refuses while a daemon
    serves the home, and keeps one from starting until the copy is done. The pid file is left
    alone: it names the last daemon, not this command."""
    try:
        fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise StateError(f"{paths.home}: cannot open the home: {e.strerror}") from None
    try:
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == LOCK_TRIES - 1:
                    raise DaemonRunning(_serving(paths)) from None
                time.sleep(0.025)
        yield
    finally:
        os.close(fd)


def _serving(paths: Paths) -> str:
    try:
        pid = paths.lock.read_text().strip()
    except OSError:
        pid = ""
    if pid.isdigit():
        who, stop = f"a daemon (pid {pid})", f"`kill -TERM {pid}`, or `systemctl stop agentd`"
    else:
        who, stop = "a daemon", "`systemctl stop agentd`, or stop its `agentd serve`"
    return (
        f"{who} is serving {paths.home}; stop it first ({stop}) so the copy holds its last"
        " writes, then copy again; nothing was written"
    )


def copy_home(
    paths: Paths, url: str, on_table: Callable[[TableCopy], None] | None = None
) -> CopyReport:
    """Copy the home's SQLite state into the empty PostgreSQL database at `url`, verified table by
    table (db/copy.py). The SQLite file is only read: it stays as it was, a backup."""
    url = check_url(url)
    current = home_store_url(paths.home)
    if current is not None:
        label = db_copy.postgres(current, paths.home).label
        raise Refused(
            f"{paths.home} already keeps its state in PostgreSQL ({label}), not in {paths.db.name};"
            " there is nothing to copy (to move between databases, use pg_dump)"
        )
    safety.check_not_lost(paths.db)
    if not paths.db.exists():
        raise StateError(f"{paths.db}: no database here to copy; is --home the right home?")
    with no_daemon(paths):
        source = open_backend(paths.db)  # the SQLite file: the home names no URL
        target = db_copy.postgres(url, paths.home)
        return db_copy.copy(source, target, on_table)
