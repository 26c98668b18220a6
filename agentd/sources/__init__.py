"""Sources that observe the world: the Source protocol, the registry, and snapshot diffing.
May import config/, outside/ and the ground; never db/, llm/ or a loop.

A source reads one outside thing (an HTTP endpoint, a command's output, a log file's tail) and
returns a small JSON-able dict. It never raises for an outside failure: the failure is the observation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from agentd.config import (
    CHECK_FAILED,
    HEALTHY,
    UNHEALTHY,
    CommandSource,
    FileTailSource,
    HttpSource,
    ImapSource,
    McpSource,
    PrometheusSource,
    SourceConfig,
)
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
    if isinstance(cfg, McpSource):
        from agentd.sources.mcp import McpSourceReader

        return McpSourceReader(name, cfg, base_env=base_env)
    if isinstance(cfg, PrometheusSource):
        from agentd.sources.prometheus import PrometheusReader

        return PrometheusReader(name, cfg)
    if isinstance(cfg, ImapSource):
        from agentd.sources.imap import ImapSourceReader

        return ImapSourceReader(name, cfg)
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
COUNTERS = frozenset(
    {
        "streak",
        "since",
        "consecutive_failures",
        "episode",
        "last_state",
        "last_since",
        "last_streak",
        "readings",  # a prometheus source's values move every look; its `breached` list is news
    }
)


def state_of(obs: object) -> str | None:
    """`healthy`, `unhealthy`, `check_failed` (the look itself could not be made: a bad URL, an
    unresolvable host, a missing binary — it says nothing about the service), or None for a
    source that reports no health (no `ok`)."""
    if not isinstance(obs, dict) or "ok" not in obs:
        return None
    if obs.get("check_failed"):
        return CHECK_FAILED
    return HEALTHY if obs["ok"] else UNHEALTHY


def with_history(previous: JSON | None, current: JSON, now: float) -> JSON:
    """Each source that reports `ok` gains its history from the previous snapshot: `streak`
    (looks in a row in this state), `since` (when this state began, ISO 8601 UTC) and `episode`
    (a number that moves on each change of state: with `since` it names the stretch, so a
    trigger fires once per stretch). A source with health also gains `healthy` and
    `consecutive_failures`; a broken check gains `last_healthy` (the health before it broke)."""
    out: JSON = {}
    for name, obs in current.items():
        state = state_of(obs)
        if state is None:
            out[name] = obs
            continue
        before = (previous or {}).get(name) or {}
        # A broken check is no reading: look through it to the state before, so healthy or
        # unhealthy → check_failed → the same state again is one stretch (one episode).
        prior, prior_since, prior_streak = (
            state_of(before),
            before.get("since"),
            before.get("streak"),
        )
        if prior == CHECK_FAILED and state != CHECK_FAILED:
            prior = before.get("last_state")
            prior_since, prior_streak = before.get("last_since"), before.get("last_streak")
        same = prior == state and prior_since is not None
        streak = int(prior_streak or 0) + 1 if same else 1
        episode = int(before.get("episode", 0))
        seen: JSON = {
            **obs,
            "streak": streak,
            "since": prior_since if same else _iso(now),
            # A broken check keeps the episode of the state it interrupts.
            "episode": max(episode, 1) if same or state == CHECK_FAILED else episode + 1,
        }
        if state == CHECK_FAILED:
            seen["last_healthy"] = before.get("healthy", before.get("last_healthy"))
            broke = state_of(before) == CHECK_FAILED
            seen["last_state"] = before.get("last_state") if broke else state_of(before)
            seen["last_since"] = before.get("last_since") if broke else before.get("since")
            seen["last_streak"] = before.get("last_streak") if broke else before.get("streak")
        else:
            seen["healthy"] = state == HEALTHY
            seen["consecutive_failures"] = 0 if state == HEALTHY else streak
        out[name] = seen
    return out


def _iso(now: float) -> str:
    """`2026-03-01T17:00:00Z`: the one JSON time format (agentd.text.iso)."""
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def transitions(previous: JSON | None, current: JSON) -> list[tuple[str, bool]]:
    """(source, healthy) for each source whose health flipped — or that is first seen failing.
    A broken check is no reading: the health before it counts, so unhealthy → check_failed →
    unhealthy is no flip, and check_failed itself never is one."""
    flips = []
    for name, obs in current.items():
        if not isinstance(obs, dict) or "healthy" not in obs:
            continue
        before = (previous or {}).get(name) or {}
        was = before["healthy"] if "healthy" in before else before.get("last_healthy")
        if (True if was is None else was) != obs["healthy"]:
            flips.append((name, bool(obs["healthy"])))
    return flips


def state_changes(previous: JSON | None, current: JSON) -> list[tuple[str, str]]:
    """(source, state) for each source whose state changed since the previous look; a source
    first seen healthy is no change (nothing happened), first seen otherwise is."""
    moved = []
    for name, obs in current.items():
        state = state_of(obs)
        if state is None:
            continue
        if (state_of((previous or {}).get(name)) or HEALTHY) != state:
            moved.append((name, state))
    return moved


def episode_key(watcher: str, source: str, obs: JSON) -> str:
    """Names one stretch of a source's state as seen by the agent `watcher` that polls it."""
    return f"{watcher}/{source}/{obs.get('episode', 1)}@{obs.get('since', '')}"


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
