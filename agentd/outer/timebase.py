"""The home's time base: the wall, or the simulated clock of `agentd serve --clock-speed N`.

A scaled clock is recorded in `meta` (speed, and one wall/simulated instant pair), so simulated
time goes on while the daemon is down (an outage of 10 wall seconds at 3600× is 10 simulated
hours), a restart continues from where it left instead of jumping back to the wall, and the CLI
(a separate process) stamps schedules and snoozes on the same time as the daemon compares them.
Serving without --clock-speed returns the home to the wall. A testing option, never production.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentd.db import meta

if TYPE_CHECKING:  # the clock's sleeps import asyncio: only the daemon runs one
    from agentd.clock import ScaledClock

KEY = "clock"


def _recorded(c: Any) -> dict[str, float] | None:
    text = meta.get_meta(c, KEY)
    if not text:
        return None
    try:
        value = json.loads(text)
        return {k: float(value[k]) for k in ("speed", "wall0", "sim0")}
    except (ValueError, KeyError, TypeError):
        return None  # unreadable: the wall, as if none was recorded


def now(c: Any, wall_now: float) -> float:
    """The home's now: simulated if a scaled clock is recorded, else the wall's."""
    rec = _recorded(c)
    if rec is None:
        return wall_now
    return rec["sim0"] + (wall_now - rec["wall0"]) * rec["speed"]


def scaled(c: Any, speed: float, wall_now: float) -> ScaledClock:
    """Record (or continue) the home's scaled clock at `speed`; time never moves back."""
    from agentd.clock import ScaledClock

    start = max(now(c, wall_now), wall_now)
    meta.set_meta(c, KEY, json.dumps({"speed": speed, "wall0": wall_now, "sim0": start}))
    return ScaledClock(speed, start=start)


def to_wall(c: Any, wall_now: float) -> float | None:
    """Forget a recorded scaled clock (the daemon serves on the wall again); returns the
    simulated now it had reached (the home's rows may be stamped up to there), or None."""
    if not meta.get_meta(c, KEY):
        return None
    reached = now(c, wall_now)
    meta.set_meta(c, KEY, "")  # empty: the wall
    return reached
