"""The daemon's clock, chosen at start: the wall, or the home's simulated clock of `serve
--clock-speed N [--clock-start ISO]`, recorded in the database first (agentd/outer/timebase.py) so
the daemon's clock and every row's stamp (agentd/db/stamp.py) are computed from one record."""

from __future__ import annotations

from typing import Any

import structlog

from agentd.clock import Clock, SystemClock
from agentd.db import stamp
from agentd.db.store import Store
from agentd.outer import timebase

log = structlog.get_logger("agentd.daemon")


async def home_clock(store: Store, speed: float | None, start: float | None) -> Clock:
    """The wall, or the home's simulated clock at `speed` (from `start`, else continued from
    its last run). A `start` before the home's now is obeyed, and logged."""
    wall = stamp.wall()
    if speed is not None:

        def record(c: Any) -> tuple[float, Clock]:
            was = timebase.now(c, wall)  # before the record changes
            return was, timebase.scaled(c, speed, wall, start)

        was, clock = await store.write(record)
        log.warning("daemon.clock_scaled", speed=speed, now=clock.now(), note="testing only")
        if start is not None and start < was:
            log.warning(
                "daemon.clock_moved_back",
                behind_s=round(was - start),
                note="--clock-start is before the home's now: rows stamped since may lie ahead",
            )
        return clock
    reached = await store.write(lambda c: timebase.to_wall(c, wall))
    if reached is not None and reached > wall:
        log.warning(
            "daemon.clock_reset",
            note="this home ran on a simulated clock; times it recorded may lie in the future",
            ahead_s=round(reached - wall),
        )
    return SystemClock()
