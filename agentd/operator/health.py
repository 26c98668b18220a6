"""What `agentd doctor` checks of the home's contents (the file itself it inspects on its own):
the open goals with their cadences and the event names seen, and each channel's delivery health.
One read each."""

from __future__ import annotations

from typing import Any

from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.checkins import cadence_row
from agentd.db.store import SyncStore
from agentd.models import JSON, Goal


def goal_facts(
    store: SyncStore, events_looked_at: int
) -> tuple[list[Goal], dict[int, dict[str, float]], set[str]]:
    """The active and paused goals, each one's cadence bounds set (every_s, min_s, max_s), and
    the names among the latest `events_looked_at` events."""

    def read(c: Any) -> tuple[list[Goal], dict[int, dict[str, float]], set[str]]:
        goals = [g for g in q.list_goals(c) if g.status in ("active", "paused")]
        cadences: dict[int, dict[str, float]] = {}
        for goal in goals:
            row = cadence_row(c, goal.goal_id) or {}
            cadences[goal.goal_id] = {
                k: float(row[k]) for k in ("every_s", "min_s", "max_s") if row.get(k) is not None
            }
        names = {e.name for e in qi.list_events(c, events_looked_at)}
        return goals, cadences, names

    return store.read(read)


def channel_health(store: SyncStore) -> dict[str, JSON]:
    """Per notification channel: messages pending and given up, the last sent, whether its
    latest attempt failed (`failing`, with the error), what quiet hours hold (`held`, and
    `held_items`: item, category, stage, `until`, `tz`) and first messages that will arrive after
    their item expires (`late`). agentd.views.held.held_summary / late_summary say it in words
    (`agentd status` shows the same, read by agentd.operator.overview)."""
    return store.read(outbox.channel_health)
