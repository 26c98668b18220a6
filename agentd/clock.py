"""The one clock: every place that needs "now" or waits takes it from here, so tests and the
outer-loop benchmark run weeks of schedules in seconds, and `agentd serve --clock-speed N` runs a
real daemon N times faster than the wall (a documented testing option, never for production).

Times are unix seconds (UTC). `SystemClock` is the wall; `ScaledClock` starts at the wall's now (or
at a given instant: `serve --clock-start`) and runs `speed` times faster; `ManualClock` moves only
when told (simulations). asyncio is imported by the sleeps alone: a CLI command that only stamps a
row (agentd/db/stamp.py) reads the wall from here without paying for it."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Unix seconds, UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(seconds, 0.0))


class ScaledClock:
    """Simulated time that is `start` (default: the wall's now) at the wall instant `wall0`
    (default: now) and runs `speed`× faster.

    It reads the wall, not the monotonic clock, on purpose: the CLI computes the home's now from
    the same (speed, wall0, start) record (agentd/outer/timebase.py), and the two agree only if
    both read the same clock. A wall step (NTP) moves simulated time by the step × speed."""

    def __init__(
        self, speed: float, start: float | None = None, wall0: float | None = None
    ) -> None:
        if speed <= 0:
            raise ValueError("clock speed must be positive")
        self.speed = speed
        self._wall0 = time.time() if wall0 is None else wall0
        self._sim0 = self._wall0 if start is None else start

    def now(self) -> float:
        return self._sim0 + (time.time() - self._wall0) * self.speed

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(seconds, 0.0) / self.speed)


class ManualClock:
    """Time that moves only by `advance` / `set`: a discrete-event simulation's clock."""

    def __init__(self, start: float) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def set(self, t: float) -> None:
        self.t = max(self.t, t)

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.t += max(seconds, 0.0)  # nothing else runs "meanwhile" in a simulation
        await asyncio.sleep(0)


SYSTEM = SystemClock()
