"""The daemon's open files: the soft limit raised to the hard one at start, each listener's share
of it, and an `accept()` that fails for want of descriptors logged once a minute, not once per try.

asyncio's accept loop reports EMFILE (and ENFILE, ENOBUFS, ENOMEM) to the loop's exception
handler, whose default logs a traceback, and on Python 3.11 goes on trying up to the backlog's
length in the same turn (python/cpython#151615): thousands of tracebacks a second. The handler
installed here turns each into one `api.accept_failed` line, which agentd's log holds back while
it repeats (agentd/log.py); everything else goes to the handler that was there before.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Iterator
from typing import Any

import structlog

from agentd.outside import process

log = structlog.get_logger("agentd.api")

ACCEPT_FAILED = "socket.accept() out of system resource"  # asyncio's message (selector_events)
SHARE = 4  # a listener holds at most this fraction of the open-file limit: 1/4


def raise_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one and return the soft limit now in force.

    systemd starts services with soft 1,024 (for programs that use select(), which asyncio's
    epoll does not need) and a far higher hard limit a process may take on its own."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft
    try:
        # prlimit: the prlimit64 call, which the unit's `SystemCallFilter=~@resources` allows;
        # a plain setrlimit call (some C libraries' setrlimit) is in @resources: SIGSYS.
        resource.prlimit(0, resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:  # a sandbox may refuse: run with the limit we have
        log.warning("daemon.files_limit_kept", soft=soft, hard=hard, error=str(e))
        return soft
    process.children_start_with(soft, hard)  # commands start with the limit we were given
    return hard


def share(limit: int) -> int:
    """`limit` connections, or fewer: at most 1/SHARE of the open-file limit, so the listeners
    together always leave descriptors for the database, commands and outgoing requests."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, soft // SHARE))


@contextlib.contextmanager
def accept_failures_logged(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While inside, a failed accept is the line `api.accept_failed` (no traceback)."""
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_FAILED:
            log.error(
                "api.accept_failed",
                error=str(context.get("exception")),
                note="out of open files: connections wait in the backlog; see `[api] "
                "max_connections` and the service's LimitNOFILE=",
            )
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    try:
        yield
    finally:
        loop.set_exception_handler(previous)
