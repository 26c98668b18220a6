"""Journal retention in the daemon: once a wall hour, what `journal_retention_days` lets go,
pruned in bounded chunks (db/meta.py `prune`, Store.write_chunks), each its own transaction."""

from __future__ import annotations

import asyncio
import contextlib
import functools

import structlog

from agentd.db import meta, stamp
from agentd.errors import StateError
from agentd.runs.deps import Deps

log = structlog.get_logger("agentd.daemon")


async def retention(deps: Deps, stop: asyncio.Event) -> None:
    """Apply `journal_retention_days` once a wall hour: finished runs' steps, old snapshots.
    The days are the home's (agentd/db/stamp.py): under --clock-speed, simulated days."""
    keep_s = deps.config.daemon.journal_retention_days * 86400
    while not stop.is_set():
        try:
            horizon = await deps.store.read(stamp.now) - keep_s
            pruned = await deps.store.write_chunks(
                functools.partial(meta.prune, older_than=horizon), until=stop
            )
        except StateError as e:  # a lock held too long: prune at the next hour
            # During a database outage (said once: db.unreachable) not an error of its own
            quiet = deps.store.outage is not None
            (log.debug if quiet else log.error)("journal.prune_failed", error=str(e))
            pruned = 0
        if pruned:
            log.info("journal.pruned", rows=pruned)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 3600)
