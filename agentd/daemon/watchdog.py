"""The daemon's watchdog: a real read of the database each period, then WATCHDOG=1 to systemd; a
database that keeps failing, or a file removed or replaced under the daemon, stops it (exit 1)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import structlog

from agentd import config
from agentd.daemon import sdnotify
from agentd.db.sqlite.connection import probe
from agentd.errors import StateError
from agentd.runs.deps import Deps

log = structlog.get_logger("agentd.daemon")


async def watchdog(deps: Deps, stop: asyncio.Event, failures: list[str]) -> None:
    """Prove the loop and the database are alive: a real read each period, then WATCHDOG=1.

    When the database keeps failing (store.errors: every caller's errors, not just ours), stop
    vouching for the process and end it with exit code 1: logging the same error ten times a
    second while systemd hears all is well helps nobody."""
    interval = config.watchdog_interval_s() or deps.config.daemon.watchdog_interval_s
    inode = _inode(deps.store.path)
    told = None  # the outage systemd's STATUS says
    while not stop.is_set():
        try:
            async with asyncio.timeout(interval):
                await deps.store.read(probe)
        except (TimeoutError, StateError) as e:
            outage = deps.store.outage
            if outage is None and isinstance(e, TimeoutError) and deps.store.backend.shared:
                # A shared database that stalls (TCP up, no answer) is an outage once its client
                # deadline, past the lease, cuts the statement; systemd's WatchdogSec is shorter.
                label = deps.store.backend.label
                outage = f"the database {label} has not answered for {interval:.0f} s; waiting"
            if outage is not None:
                # A shared database's outage: the process is well and waits for it (restarting
                # it would not bring the database back), so systemd still hears WATCHDOG=1.
                sdnotify.notify("WATCHDOG=1")
                if told is None:
                    sdnotify.notify(f"STATUS=waiting: {outage}"[:200])
                told = outage
            else:
                log.error("daemon.unhealthy", error=str(e) or "database read timed out")
        else:
            if told is not None:
                sdnotify.notify("STATUS=serving")
                told = None
            if not deps.store.errors.failing() and _inode(deps.store.path) == inode:
                sdnotify.notify("WATCHDOG=1")
        if _inode(deps.store.path) != inode:  # deleted or replaced: our writes would be lost
            failures.append(f"{deps.store.path} was removed or replaced under the daemon")
            log.critical(
                "daemon.database_gone", error=failures[-1],
                note="stopping before more is written to a file nobody can open; restore the "
                "latest backup (docs/systemd.md, 'Backups and restore')",
            )  # fmt: skip
            sdnotify.notify(f"STATUS=database gone: {failures[-1]}"[:200])
            stop.set()
            return
        if deps.store.errors.failing():
            failures.append(deps.store.errors.last)
            log.critical(
                "daemon.database_failing",
                error=deps.store.errors.last,
                errors=deps.store.errors.limit,
                within_s=deps.store.errors.window_s,
                note=f"watchdog stopped; exiting with status 1; {deps.store.errors.note}",
            )
            sdnotify.notify(f"STATUS=database failing: {deps.store.errors.last}"[:200])
            stop.set()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None
