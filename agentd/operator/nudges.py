"""How good the nudges are, measured on the home's real goals (`agentd checkins report`, the
status call-out): per goal, the share of its check-ins' nudges accepted, dismissed and ignored
until they lapsed, how soon a person reacted, and what that did to its cadence (each dismissed or
ignored nudge backs its check-ins off a step). The production counterpart of bench/outer_loop.py.
"""

from __future__ import annotations

import statistics
from typing import Any

from agentd.db import metrics as qm
from agentd.db.store import SyncStore
from agentd.models import JSON, from_ts

MOSTLY = 0.5  # past this share of a goal's answered nudges dismissed, `status` calls it out
AT_LEAST = 3  # … once at least this many were answered or ignored (one dismissal is no pattern)


def _share(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 3)


def report(c: Any, goal_id: int | None = None) -> list[JSON]:
    """One entry per goal that was ever nudged (or only `goal_id`), by goal id."""
    cadences = {r[0]: r[1:] for r in qm.cadence_rows(c)}
    by_goal: dict[int, JSON] = {}
    reactions: dict[int, list[float]] = {}
    for gid, title, agent, outcome, posted, reacted in qm.nudge_rows(c):
        if goal_id is not None and gid != goal_id:
            continue
        entry = by_goal.setdefault(gid, {"goal_id": gid, "title": title, "agent": agent,
                                          "nudges": 0, "accepted": 0, "dismissed": 0,
                                          "ignored": 0, "open": 0})  # fmt: skip
        entry["nudges"] += 1
        entry[outcome] += 1
        if reacted is not None and posted is not None:
            reactions.setdefault(gid, []).append(max(0.0, reacted - posted))
    out = []
    for gid, e in sorted(by_goal.items()):
        settled = e["nudges"] - e["open"]
        times = reactions.get(gid, [])
        backoff, next_at, why = cadences.get(gid, (0, None, None))
        e.update(
            accepted_share=_share(e["accepted"], settled),
            dismissed_share=_share(e["dismissed"], settled),
            ignored_share=_share(e["ignored"], settled),
            median_reaction_s=None if not times else round(statistics.median(times), 1),
            backoff_steps=int(backoff or 0),
            next_checkin_at=None if next_at is None else from_ts(next_at),
            next_why=why,
            mostly_dismissed=settled >= AT_LEAST and e["dismissed"] / settled > MOSTLY,
        )
        out.append(e)
    return out


def quality(store: SyncStore, goal_id: int | None = None) -> list[JSON]:
    """`report` in one read (`agentd checkins report`); NotFound for an unknown goal."""
    from agentd.db import queries as q

    def read(c: Any) -> list[JSON]:
        if goal_id is not None:
            q.get_goal(c, goal_id)
        return report(c, goal_id)

    return store.read(read)


def mostly_dismissed(c: Any) -> list[JSON]:
    """The goals whose nudges are mostly dismissed (for `status`, at every call: counted in the
    database, never the home's every nudge): id, title, counts, share, backoff."""
    return [
        {"goal_id": gid, "title": title, "dismissed": int(dismissed), "nudges": int(nudges),
         "dismissed_share": _share(int(dismissed), int(settled)), "backoff_steps": int(backoff)}
        for gid, title, dismissed, nudges, settled, backoff in qm.dismissed_goals(c, AT_LEAST, MOSTLY)
    ]  # fmt: skip
