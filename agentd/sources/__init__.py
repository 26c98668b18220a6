"""Sources that observe the world: the Source protocol, the registry, and snapshot diffing.

A source reads one outside thing (an HTTP endpoint, a command's output, a log file's tail) and
returns a small JSON-able dict. It never raises for an outside failure: the failure is the observation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from agentd.config import CommandSource, FileTailSource, HttpSource, SourceConfig
from agentd.models import JSON


class Source(Protocol):
    name: str

    async def observe(self) -> JSON:
        """One look at the world; `{"error": "..."}` when the thing cannot be reached."""
        ...


def build(name: str, cfg: SourceConfig, base_env: Mapping[str, str]) -> Source:
    if isinstance(cfg, HttpSource):
        from agentd.sources.http import HttpSourceReader

        return HttpSourceReader(name, cfg)
    if isinstance(cfg, CommandSource):
        from agentd.sources.command import CommandSourceReader

        return CommandSourceReader(name, cfg, base_env=base_env)
    if isinstance(cfg, FileTailSource):
        from agentd.sources.file_tail import FileTailReader

        return FileTailReader(name, cfg)
    raise TypeError(f"unknown source config {type(cfg).__name__}")


async def observe_all(sources: list[Source], timeout_s: float = 30.0) -> JSON:
    """Read every source concurrently into one world snapshot keyed by source name."""

    async def one(src: Source) -> JSON:
        try:
            async with asyncio.timeout(timeout_s):
                return await src.observe()
        except TimeoutError:
            return {"error": f"no answer within {timeout_s:g}s"}

    results = await asyncio.gather(*(one(s) for s in sources))
    return {s.name: r for s, r in zip(sources, results, strict=True)}


# Fields that move on every look by design; a change in them alone is not news.
COUNTERS = frozenset({"streak", "since", "consecutive_failures"})


def with_history(previous: JSON | None, current: JSON, now: float) -> JSON:
    """Each source that reports `ok` gains its health history from the previous snapshot:
    `healthy`, `streak` (looks in a row in this state), `consecutive_failures` and `since` (when
    this state began, ISO 8601 UTC)."""
    out: JSON = {}
    for name, obs in current.items():
        if not isinstance(obs, dict) or "ok" not in obs:
            out[name] = obs
            continue
        before = (previous or {}).get(name) or {}
        healthy = bool(obs["ok"])
        same = before.get("healthy") == healthy and "since" in before
        streak = int(before.get("streak", 0)) + 1 if same else 1
        out[name] = {
            **obs,
            "healthy": healthy,
            "streak": streak,
            "consecutive_failures": 0 if healthy else streak,
            "since": before["since"]
            if same
            else datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        }
    return out


def transitions(previous: JSON | None, current: JSON) -> list[tuple[str, bool]]:
    """(source, healthy) for each source whose health flipped — or that is first seen failing."""
    flips = []
    for name, obs in current.items():
        if not isinstance(obs, dict) or "healthy" not in obs:
            continue
        before = (previous or {}).get(name) or {}
        if before.get("healthy", True) != obs["healthy"]:
            flips.append((name, bool(obs["healthy"])))
    return flips


def changes(previous: JSON | None, current: JSON) -> JSON:
    """What differs between two snapshots, ignoring noisy measurements (keys ending in `_ms`)
    and the history counters that move on every look.

    Returns `{source: {field: [old, new]}}`; a source seen for the first time maps to `"new"`.
    """
    diff: JSON = {}
    for name, now in current.items():
        before = (previous or {}).get(name)
        if before is None:
            diff[name] = "new"
            continue
        fields = {
            k: [before.get(k), now.get(k)]
            for k in sorted(set(before) | set(now))
            if not k.endswith("_ms") and k not in COUNTERS and before.get(k) != now.get(k)
        }
        if fields:
            diff[name] = fields
    return diff
