"""Times as the CLI shows them — one style in every view (times typed in: agentd.operator.parse).

--json carries ISO 8601 in UTC with a `Z` (`2026-03-01T17:00:00Z`). Tables and views show local
time with its zone, the year only when it is not this year (`Mar 1 18:00 CET`, `Mar 1 2025 18:00
CET`), and how far away a time is in one style: `5m ago`, `in 2h`. A time typed without a zone is
read in the local zone; the local zone is the process's (TZ, else the system's).
"""

from __future__ import annotations

import itertools
from datetime import datetime, tzinfo

from agentd.text import iso as iso  # views show --json times through here


def _local(dt: datetime, zone: tzinfo | None = None) -> datetime | None:
    try:  # no zone: the local one, with its abbreviation for this instant
        return dt.astimezone(zone)
    except (ValueError, OverflowError, OSError):  # beyond what the platform's clock holds
        return None


def local(
    dt: datetime | None,
    now: datetime,
    *,
    seconds: bool = False,
    zone: tzinfo | None = None,
    weekday: bool = False,
) -> str:
    """`Mar 1 18:00 CET` (`Sun Mar 1 …` with `weekday`), the year after the day when it is not
    `now`'s year; in `zone`, else the local zone; `-` for None."""
    if dt is None:
        return "-"
    here, today = _local(dt, zone), _local(now, zone)
    if here is None or today is None:
        return iso(dt)
    year = f" {here.year}" if here.year != today.year else ""
    clock = here.strftime("%H:%M:%S" if seconds else "%H:%M")
    name = f"{here:%a} " if weekday else ""
    return f"{name}{here:%b} {here.day}{year} {clock} {here.tzname() or ''}".rstrip()


def clock(dt: datetime) -> str:
    """`18:00:05`, local: a time of day in a timeline whose day and zone are said above it."""
    here = _local(dt)
    return iso(dt) if here is None else here.strftime("%H:%M:%S")


def day(dt: datetime, now: datetime) -> str:
    """`Tue Mar 1 (CET)`, or with the year when it is not this year: a timeline's day heading."""
    here, today = _local(dt), _local(now)
    if here is None or today is None:
        return iso(dt)[:10]
    year = f" {here.year}" if here.year != today.year else ""
    return f"{here:%a %b} {here.day}{year} ({here.tzname() or 'local'})"


def span(seconds: float) -> str:
    """A duration in its two largest units: 45s, 12m30s, 5h12m, 2d23h."""
    left = int(abs(seconds))
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    for (unit, size), (small, small_size) in itertools.pairwise(units):
        if left >= size:
            major, rest = divmod(left, size)
            minor = rest // small_size
            return f"{major}{unit}{minor}{small}" if minor else f"{major}{unit}"
    return f"{left}s"


def relative(dt: datetime | None, now: datetime) -> str:
    """The one "ago" style: `5m ago`, `in 2h`, `now`; `-` for None."""
    if dt is None:
        return "-"
    try:
        left = (dt - now).total_seconds()
    except OverflowError:
        return "-"
    if abs(left) < 1:
        return "now"
    return f"in {span(left)}" if left > 0 else f"{span(left)} ago"


def stamp(dt: datetime | None, now: datetime, *, seconds: bool = False) -> str:
    """`Mar 1 18:00 CET (in 2h)`: a time in a detail view, absolute and relative."""
    return "-" if dt is None else f"{local(dt, now, seconds=seconds)} ({relative(dt, now)})"
