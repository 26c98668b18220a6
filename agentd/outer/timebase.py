"""The home's time base: the wall, or the simulated clock of `agentd serve --clock-speed N`.

A scaled clock is recorded in `meta` (speed, and one wall/simulated instant pair), so simulated
time goes on while the daemon is down (an outage of 10 wall seconds at 3600× is 10 simulated
hours), a restart continues from where it left instead of jumping back to the wall, and the CLI
(a separate process) stamps rows and computes its views' "now" on the same time as the daemon
(agentd/db/stamp.py reads the record inside each transaction). `--clock-start ISO` sets the
simulated now at the start (every start it is given: the home's rows may then lie in its future).
Serving without --clock-speed returns the home to the wall. A testing option, never production.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentd.db import meta, stamp

if TYPE_CHECKING:  # the clock's sleeps import asyncio: only the daemon runs one
    from agentd.clock import ScaledClock

KEY = stamp.KEY


def now(c: Any, wall_now: float) -> float:
    """The home's now: simulated if a scaled clock is recorded, else the wall's."""
    return stamp.at(c, wall_now)


def scaled(c: Any, speed: float, wall_now: float, start: float | None = None) -> ScaledClock:
    """Record (or continue) the home's scaled clock at `speed`; returns the daemon's clock.

    Without `start`, time never moves back: it continues from the recorded clock (or the wall,
    whichever is later). With `start` (`--clock-start`), the simulated now is `start` from here."""
    from agentd.clock import ScaledClock

    if start is None:
        start = max(now(c, wall_now), wall_now)
    meta.set_meta(c, KEY, json.dumps({"speed": speed, "wall0": wall_now, "sim0": start}))
    return ScaledClock(speed, start=start, wall0=wall_now)


def to_wall(c: Any, wall_now: float) -> float | None:
    """Forget a recorded scaled clock (the daemon serves on the wall again); returns the
    simulated now it had reached (the home's rows may be stamped up to there), or None."""
    if not meta.get_meta(c, KEY):
        return None
    reached = now(c, wall_now)
    meta.set_meta(c, KEY, "")  # empty: the wall
    return reached
