"""What each hook has seen (`agentd hooks` asks the daemon): deliveries accepted, events recorded
and repeated, refusals by status, the last delivery — loaded from the database once
(agentd/operator/hook_counts.py) and added to here, with the refusals not yet written kept
apart (`pending`); and the rate limit, a token bucket per hook holding a minute's worth."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

REASONS = 50  # kinds of refusal told apart per hook (the rest are counted by status)


@dataclass
class HookStats:
    accepted: int = 0
    recorded: int = 0
    duplicates: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    last_at: float | None = None  # unix seconds of the last delivery, accepted or refused
    last: str = ""  # how it ended: "accepted" or "refused 401: why"
    tokens: float | None = None  # the rate limit's bucket (None: full)
    filled_at: float = 0.0


class Stats:
    def __init__(self) -> None:
        self.hooks: dict[str, HookStats] = {}
        self.pending: dict[str, Counter[str]] = {}  # refusals not yet written, by hook
        self.pending_last: dict[str, tuple[float, str]] = {}

    def restore(self, kept: dict[str, dict[str, Any]]) -> None:
        """Add the counts kept in the database (at the daemon's first look)."""
        for name, row in kept.items():
            s = self._of(name)
            s.accepted += int(row.get("accepted", 0))
            s.recorded += int(row.get("recorded", 0))
            s.duplicates += int(row.get("duplicates", 0))
            s.refused.update({str(k): int(v) for k, v in (row.get("refused_by") or {}).items()})
            if row.get("last_at") and (s.last_at is None or row["last_at"] > s.last_at):
                s.last_at, s.last = float(row["last_at"]), str(row.get("last", ""))

    def take_pending(self, name: str) -> dict[str, Any]:
        """The hook's refusals not yet written, as a delta for hook_counts (now written)."""
        delta: dict[str, Any] = {"refused_by": dict(self.pending.pop(name, Counter()))}
        if name in self.pending_last:
            delta["last_at"], delta["last"] = self.pending_last.pop(name)
        return delta

    def put_back(self, name: str, delta: dict[str, Any]) -> None:
        """A delta whose write failed: written with the next one."""
        self.pending.setdefault(name, Counter()).update(delta.get("refused_by") or {})
        if "last_at" in delta and name not in self.pending_last:
            self.pending_last[name] = (delta["last_at"], delta.get("last", ""))

    def _of(self, name: str) -> HookStats:
        return self.hooks.setdefault(name, HookStats())

    def admit(self, name: str, per_minute: int, now: float, *, spend: bool = True) -> bool:
        """One delivery from the hook's bucket (or, with `spend` False, whether one is left);
        False when it is empty (429)."""
        s = self._of(name)
        tokens = float(per_minute) if s.tokens is None else s.tokens
        tokens = min(float(per_minute), tokens + (now - s.filled_at) * per_minute / 60.0)
        s.filled_at = now
        if tokens < 1.0:
            s.tokens = tokens
            return False
        s.tokens = tokens - 1.0 if spend else tokens
        return True

    def accepted(self, name: str, recorded: int, duplicates: int) -> None:
        s = self._of(name)
        s.accepted += 1
        s.recorded += recorded
        s.duplicates += duplicates
        s.last_at, s.last = time.time(), "accepted"

    def refused(self, name: str, status: int, why: str) -> None:
        s = self._of(name)
        reason = f"{status} {why}"[:120]
        if reason not in s.refused and len(s.refused) >= REASONS:
            reason = f"{status} (other reasons)"  # a stranger's varied Content-Length, …
        s.refused[reason] += 1
        s.last_at, s.last = time.time(), f"refused {status}: {why}"[:200]
        self.pending.setdefault(name, Counter())[reason] += 1
        self.pending_last[name] = (s.last_at, s.last)

    def as_json(self) -> dict[str, Any]:
        return {
            name: {
                "accepted": s.accepted,
                "recorded": s.recorded,
                "duplicates": s.duplicates,
                "refused": sum(s.refused.values()),
                "refused_by": dict(s.refused),
                "last_at": s.last_at,
                "last": s.last,
            }
            for name, s in self.hooks.items()
        }
