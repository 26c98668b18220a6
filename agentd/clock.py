"""The one clock: every place that needs "now" or waits takes it from here, so tests and the
outer-loop benchmark run weeks of schedules in seconds, and `agentd serve --clock-speed N` runs a
real daemon N times faster than the wall (a documented testing option, never for production).

Times are unix seconds (UTC). `SystemClock` is the wall; `ScaledClock` starts at the wall's now and
runs `speed` times faster; `ManualClock` moves only when told (simulations)."""

from __future__ import annotations

import asyncio
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
        await asyncio.sleep(max(seconds, 0.0))


class ScaledClock:
    """Simulated time that starts at the wall's now (or `start`) and runs `speed`× faster."""

    def __init__(self, speed: float, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("clock speed must be positive")
        self.speed = speed
        self._wall0 = time.monotonic()
        self._sim0 = time.time() if start is None else start

    def now(self) -> float:
        return self._sim0 + (time.monotonic() - self._wall0) * self.speed

    async def sleep(self, seconds: float) -> None:
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
        self.t += max(seconds, 0.0)  # nothing else runs "meanwhile" in a simulation
        await asyncio.sleep(0)


SYSTEM = SystemClock()
