"""What quiet hours hold back and which pages will be late, in words: `2 held by quiet hours until
08:00 CET (nudge 9, notice 12)`. Pure: it reads the per-channel health that
agentd.db.outbox.channel_health gives (`held_items`, `late`) — `agentd status` and the web inbox
say the same sentence."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentd.models import JSON
from agentd.views.times import local

NAMED = 4  # items named in the sentence; the count says the rest


def _zone(name: object) -> tzinfo | None:
    """The IANA zone `name`; None (the local zone) when there is none."""
    try:
        return ZoneInfo(str(name)) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def at(ts: float, tz: object, now: datetime) -> str:
    """`08:00 CET` within a day of `now` in zone `tz` (else the local zone), else `Dec 3 08:00
    CET`."""
    dt = datetime.fromtimestamp(ts, UTC)
    zone = _zone(tz)
    if abs((dt - now).total_seconds()) < 86400 - 60:  # within a day either way: the hour says it
        return f"{dt.astimezone(zone):%H:%M} {dt.astimezone(zone).tzname() or ''}".rstrip()
    return local(dt, now, zone=zone)


def _name(entry: Mapping[str, Any]) -> str:
    what = f"{entry.get('category') or 'message'} {entry.get('item_id')}"
    stage = entry.get("stage")
    return f"{what} (reminder {stage})" if isinstance(stage, int) and stage > 0 else what


def held_summary(health: Mapping[str, JSON], now: datetime) -> str | None:
    """`2 held by quiet hours until 08:00 CET (nudge 9, notice 12)` over every channel: each held
    item and stage counted once (one nudge to two channels is one); ends that differ are each
    said (`3 held by quiet hours: 2 until 08:00 CET, 1 until 07:00 EST (…)`); None when nothing
    is held. An end already past says the message is due (sent on the daemon's next pass)."""
    soonest: dict[tuple[int, int], Mapping[str, Any]] = {}  # (item, stage) → its soonest end
    extra = 0  # held beyond what the health lists
    for h in health.values():
        listed = h.get("held_items") or []
        extra += max(int(h.get("held") or 0) - len(listed), 0)
        for entry in listed:
            key = (int(entry.get("item_id") or 0), int(entry.get("stage") or 0))
            if key not in soonest or float(entry["until"]) < float(soonest[key]["until"]):
                soonest[key] = entry
    if not soonest:
        return None
    order = sorted(soonest, key=lambda k: (float(soonest[k]["until"]), k))
    groups: dict[str, int] = {}
    for key in order:
        until = float(soonest[key]["until"])
        label = at(until, soonest[key].get("tz"), now)
        if until <= now.timestamp():
            label += ", due now"
        groups[label] = groups.get(label, 0) + 1
    count = len(soonest) + extra
    if len(groups) == 1:
        head = f"{count} held by quiet hours until {next(iter(groups))}"
    else:
        head = f"{count} held by quiet hours: " + ", ".join(
            f"{n} until {label}" for label, n in groups.items()
        )
    names = [_name(soonest[k]) for k in order[:NAMED]]
    more = count - len(names)
    return f"{head} ({', '.join(names)}{f', {more} more' if more > 0 else ''})"


def late_summary(health: Mapping[str, JSON], now: datetime) -> str | None:
    """`approval 5 will be late: its next try 08:10 CET is after it expires at 08:00 CET` — first
    messages whose next attempt (a retry's backoff) comes after their item expires; None if none."""
    seen: dict[object, Mapping[str, Any]] = {}
    for h in health.values():
        for entry in h.get("late") or []:
            item = entry.get("item_id")
            if item not in seen or float(entry["next_at"]) < float(seen[item]["next_at"]):
                seen[item] = entry
    if not seen:
        return None
    parts = []
    for entry in sorted(seen.values(), key=lambda e: float(e["next_at"]))[:NAMED]:
        next_at = at(float(entry["next_at"]), entry.get("tz"), now)
        expires = at(float(entry["expires_at"]), entry.get("tz"), now)
        parts.append(f"{_name(entry)} will be late: its next try {next_at} is after it expires "
                     f"at {expires}")  # fmt: skip
    more = len(seen) - len(parts)
    return "; ".join(parts) + (f"; {more} more late" if more > 0 else "")
