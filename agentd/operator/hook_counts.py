"""What each inbound hook has seen, kept across restarts: one `meta` row per hook
(`hook_counts:NAME`, a JSON object: accepted, recorded, duplicates, refused_by {why: n},
last_at, last). An accepted delivery adds to it inside the transaction that records its events
(no commit of its own); refusals, which write nothing else, are added in one write every few
seconds at most (agentd/hooks/receiver.py), so a flood of strangers costs no write per request.
Two daemons sharing a PostgreSQL database add to the same rows (a rare lost update between
them only miscounts)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agentd.db import meta as qm
from agentd.db.store import SyncStore
from agentd.text import to_json

KEY = "hook_counts:"
REASONS = 50  # kinds of refusal kept per hook (each reason is one line, cut at 120 characters)


def add(c: Any, name: str, delta: Mapping[str, Any]) -> None:
    """Add `delta` (any of accepted, recorded, duplicates, refused_by, last_at, last) to the
    hook's row, in the caller's transaction."""
    raw = qm.get_meta(c, KEY + name, "{}")
    try:
        row: dict[str, Any] = json.loads(raw)
    except ValueError:
        row = {}
    for field in ("accepted", "recorded", "duplicates"):
        row[field] = int(row.get(field, 0)) + int(delta.get(field, 0))
    reasons: dict[str, int] = dict(row.get("refused_by") or {})
    for why, n in (delta.get("refused_by") or {}).items():
        if why in reasons or len(reasons) < REASONS:
            reasons[why] = reasons.get(why, 0) + int(n)
    row["refused_by"] = reasons
    if (delta.get("last_at") or 0) >= (row.get("last_at") or 0) and delta.get("last_at"):
        row["last_at"], row["last"] = delta["last_at"], delta.get("last", "")
    qm.set_meta(c, KEY + name, to_json(row))


def adding(deltas: Mapping[str, Mapping[str, Any]]) -> Callable[[Any], int]:
    """One transaction adding each hook's delta (refusals gathered since the last write)."""

    def work(c: Any) -> int:
        for name, delta in deltas.items():
            add(c, name, delta)
        return len(deltas)

    return work


def rows(c: Any) -> dict[str, dict[str, Any]]:
    found = c.execute("SELECT key, value FROM meta WHERE key LIKE ?", (KEY + "%",)).fetchall()
    counts = {}
    for key, value in found:
        try:
            counts[str(key)[len(KEY) :]] = json.loads(value)
        except ValueError:
            continue
    return counts


def read(store: SyncStore) -> dict[str, dict[str, Any]]:
    """Each hook's counts as last written (the CLI, when no daemon answers)."""
    return store.read(rows)
