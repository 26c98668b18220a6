"""How often a goal looks again, enforced in code: the model's proposal clamped to the goal's
min / max interval, exponential backoff after dismissed nudges, a deadline that spreads looks
before it, snoozes, and local quiet hours (DST-safe). Pure: the caller passes `now`.

next_look returns the time and a one-line why that `agentd goal show` prints as is."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from agentd.outer.schedule import local_instant, zone

if TYPE_CHECKING:
    from agentd.config import Checkin

DAY = 86400.0
# Near a deadline looks come at most this often (or at the goal's own pace, if faster): looks
# spread over the days before it instead of piling up in its last hours.
DEADLINE_FLOOR_S = DAY
# The early look: at least one look this long before a deadline, when the goal allows it.
EARLY_LOOK_S = 2 * DAY
# How far before the early-look line the early look lands (so "more than 48 h" holds with margin).
EARLY_MARGIN_S = 3600.0

_QUIET = re.compile(
    r"^\s*([01]?\d|2[0-3]):([0-5]\d)\s*-\s*([01]?\d|2[0-3]):([0-5]\d)\s*$", re.ASCII
)
_NO_QUIET = {"", "none", "off", "no"}
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([smhdw])")  # ASCII digits: not "٣h"
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_UNITS = {"w": 7 * DAY, "d": DAY, "h": 3600.0, "m": 60.0, "s": 1.0}


@dataclass(frozen=True)
class Cadence:
    every_s: float  # the pace when nothing says otherwise
    min_s: float  # never look again sooner (the model cannot override)
    max_s: float  # never stay away longer (backoff stops here)
    quiet: tuple[int, int] | None  # minutes after local midnight (start, end); may wrap midnight
    tz: str  # IANA zone of the quiet hours
    deadline_looks: int = 3  # looks spread before a deadline


MAX_DURATION_S = 10 * 365 * DAY  # ten years: beyond, times leave what datetimes can show


def parse_duration(text: str) -> float:
    """Seconds in "90s", "4h", "3d", "2w", "1d12h" or plain seconds "86400" (at most 10 years)."""
    raw = text.strip().lower()
    if _SECONDS.fullmatch(raw):  # not float(): it reads "٣", "1_000", "1e3" and "nan"
        seconds = float(raw)
    else:
        parts = _DURATION.findall(raw)
        if not parts or _DURATION.sub("", raw).strip():
            raise ValueError(
                f'duration "{text}" is not valid: write e.g. 90s, 45m, 4h, 3d, 2w or 1d12h'
            ) from None
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(f'duration "{text}" is too long: at most 10 years (e.g. 520w)')
    return seconds


def format_duration(seconds: float) -> str:
    """ "4h", "1d20h", "45m", "30s": the two largest units, rounded to the minute above a minute."""
    if not math.isfinite(seconds):
        return "forever" if seconds > 0 else "0s"
    s = max(0, round(seconds if seconds < 60 else round(seconds / 60) * 60))
    if s < 60:
        return f"{s}s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            out.append(f"{s // size}{unit}")
            s %= size
    return "".join(out[:2])


def parse_quiet(text: str | None) -> tuple[int, int] | None:
    """ "22:00-08:00" → (1320, 480) minutes after local midnight; None / "none" → no quiet hours."""
    if text is None or text.strip().lower() in _NO_QUIET:
        return None
    m = _QUIET.match(text)
    if not m:
        raise ValueError(
            f'quiet hours "{text}" must look like 22:00-08:00 (local HH:MM-HH:MM) or none'
        )
    start = int(m[1]) * 60 + int(m[2])
    end = int(m[3]) * 60 + int(m[4])
    if start == end:
        raise ValueError(f'quiet hours "{text}" start and end at the same time: use none')
    return start, end


def cadence_from(checkin_cfg: Checkin, override_row: Mapping[str, object] | None) -> Cadence:
    """The agent's defaults (`agent.checkin`) with the goal's `cadences` row laid over them (NULL
    columns inherit). Incoherent bounds are mended, not refused: min wins over max, every is
    clamped between them."""

    def pick(key: str) -> object:
        if override_row is None:
            return None
        try:
            return override_row[key]
        except (KeyError, IndexError):
            return None

    def num(key: str, default: float) -> float:
        value = pick(key)
        return float(value) if isinstance(value, int | float) else default

    min_s = num("min_s", checkin_cfg.min_s)
    max_s = max(num("max_s", checkin_cfg.max_s), min_s)
    every_s = min(max(num("every_s", checkin_cfg.every_s), min_s), max_s)
    quiet_text = pick("quiet")
    quiet = parse_quiet(quiet_text if isinstance(quiet_text, str) else checkin_cfg.quiet)
    tz = pick("tz")
    return Cadence(
        every_s=every_s,
        min_s=min_s,
        max_s=max_s,
        quiet=quiet,
        tz=tz if isinstance(tz, str) and tz else checkin_cfg.tz,
        deadline_looks=checkin_cfg.deadline_looks,
    )


# --- quiet hours ---------------------------------------------------------------------------------


def in_quiet(c: Cadence, t: float) -> bool:
    """Whether the local wall clock at `t` is inside the quiet hours."""
    if c.quiet is None:
        return False
    start, end = c.quiet[0] * 60, c.quiet[1] * 60
    wall = datetime.fromtimestamp(t, zone(c.tz))
    s = wall.hour * 3600 + wall.minute * 60 + wall.second + wall.microsecond / 1e6
    return start <= s < end if start < end else (s >= start or s < end)


def leave_quiet(c: Cadence, t: float) -> float:
    """`t` itself outside quiet hours, else the moment they end (local wall time; if that wall
    time is skipped by a DST jump, the moment of the jump)."""
    for _ in range(4):  # a fall back can replay the last quiet hour once; never more
        if not in_quiet(c, t):
            return t
        assert c.quiet is not None
        tz = zone(c.tz)
        wall = datetime.fromtimestamp(t, tz)
        d = wall.date()
        if c.quiet[0] > c.quiet[1] and wall.hour * 60 + wall.minute >= c.quiet[0]:
            d += timedelta(days=1)  # quiet hours that wrap midnight end tomorrow
        end = local_instant(d, c.quiet[1] * 60, tz)
        if end <= t:  # a fall back replays the end time: take its second occurrence
            end = local_instant(d, c.quiet[1] * 60, tz, first=False)
        t = max(end, t + 1)
    return t


def quiet_start(c: Cadence, t: float) -> float:
    """When the quiet hours that contain `t` began (`t` must be inside them)."""
    assert c.quiet is not None
    tz = zone(c.tz)
    wall = datetime.fromtimestamp(t, tz)
    d = wall.date()
    if c.quiet[0] > c.quiet[1] and wall.hour * 60 + wall.minute < c.quiet[1]:
        d -= timedelta(days=1)  # after midnight: they began yesterday evening
    return local_instant(d, c.quiet[0] * 60, tz)


def _awake_before(c: Cadence, t: float, lo: float) -> float | None:
    """The latest time in [lo, t] outside quiet hours, a little before they begin; None if none."""
    if not in_quiet(c, t):
        return t
    x = max(lo, quiet_start(c, t) - 1800.0)
    return None if x > t or in_quiet(c, x) else x


def _when(c: Cadence, t: float) -> str:
    return datetime.fromtimestamp(t, zone(c.tz)).strftime("%a %H:%M")


# --- the next look ---------------------------------------------------------------------------------


def next_look(
    c: Cadence,
    now: float,
    *,
    proposed: float | None,
    backoff: int,
    deadline: float | None,
    snoozed_until: float | None,
    looking_now: bool = True,
) -> tuple[float, str]:
    """The time of the goal's next check-in and a one-line why.

    `proposed` is the model's "look again in N seconds" (None: no proposal); `backoff` counts
    dismissed or ignored nudges; `looking_now` is False when no check-in happens at `now` (the
    goal was just created or its cadence changed). Order: pace (the proposal, or every_s; backoff
    raises it to every_s·2^backoff, which a proposal cannot undercut) → clamp to [min_s, max_s] →
    deadline (see _deadline; it may only tighten) → snooze (wins over everything, the operator
    asked) → out of quiet hours. The result is never sooner than now + min_s, except the last look
    at a deadline closer than min_s: min_s must not push a look past the deadline it is for."""
    if proposed is not None and math.isnan(proposed):
        proposed = None
    interval, why = _pace(c, proposed, backoff)
    t, placed = now + interval, False
    if deadline is not None and deadline > now:
        t, why = _deadline(c, now, interval, deadline, why, early=not looking_now)
        placed = True  # _deadline already kept it out of quiet hours
    if snoozed_until is not None and snoozed_until > t:
        t, why, placed = snoozed_until, f"snoozed until {_when(c, snoozed_until)}", False
    if placed:
        return t, why
    return leave_quiet(c, t), _quiet_note(c, t, why)


def _quiet_note(c: Cadence, t: float, why: str) -> str:
    if not in_quiet(c, t):
        return why
    return f"{why}; quiet hours until {datetime.fromtimestamp(leave_quiet(c, t), zone(c.tz)):%H:%M}"


def _pace(c: Cadence, proposed: float | None, backoff: int) -> tuple[float, str]:
    """The interval before any deadline, clamped, and why."""
    backed = c.every_s * 2.0 ** min(max(backoff, 0), 60)
    backing = f"{_dismissed(backoff)}: backing off to {format_duration(min(backed, c.max_s))}"
    if proposed is not None and backoff > 0 and backed > proposed:
        interval, why = backed, f"model proposed {format_duration(proposed)}; {backing}"
    elif proposed is not None:
        interval, why = proposed, f"model proposed {format_duration(proposed)}"
    elif backoff > 0:
        interval, why = backed, backing
    else:
        interval, why = c.every_s, f"every {format_duration(c.every_s)} (the goal's cadence)"
    if interval < c.min_s:
        return c.min_s, f"{why}; clamped to the {format_duration(c.min_s)} minimum"
    if interval > c.max_s:
        if interval == backed:  # "backing off to 14d" already names the maximum
            return c.max_s, f"{why} (the maximum)"
        return c.max_s, f"{why}; capped at the {format_duration(c.max_s)} maximum"
    return interval, why


def _dismissed(backoff: int) -> str:
    return "1 nudge dismissed" if backoff == 1 else f"{backoff} nudges dismissed"


def _deadline(
    c: Cadence, now: float, interval: float, deadline: float, why: str, *, early: bool
) -> tuple[float, str]:
    """Tighten the pace before a deadline. The remaining time is cut into k equal gaps, with
    k ≥ deadline_looks + 1 (so that many looks remain before it) — but never gaps shorter than
    DEADLINE_FLOOR_S (or the goal's pace if faster, and never below min_s): that floor is what
    keeps looks from piling up in the last hours, since a stateless rule that always keeps N looks
    ahead would otherwise halve the gap forever. The last gap ends at the deadline itself: the one
    look allowed at or right after it, even if sooner than min_s. With `early` (no look happens
    at `now`, e.g. the goal was just created) and a look more than 48 h before the deadline still
    possible (min_s and quiet hours permitting), the next look is one; a look at `now` more than
    48 h ahead already is one, and another right after it would only crowd.
    Looks stay out of quiet hours, moved to the nearer side of them (see _place).
    Returns (time, why)."""
    remaining = deadline - now
    left, at = format_duration(remaining), _when(c, deadline)
    floor_s = max(c.min_s, min(interval, DEADLINE_FLOOR_S))
    k = max(math.ceil(remaining / interval), c.deadline_looks + 1)
    if remaining / k < floor_s:
        k = max(1, math.floor(remaining / floor_s))
    gap = min(remaining / k, interval)
    lo = now + min(c.min_s, remaining)
    early_line = deadline - EARLY_LOOK_S
    if early and now + gap >= early_line > now + c.min_s:
        first = _place(c, max(lo, early_line - EARLY_MARGIN_S), lo, early_line)
        if first is not None:
            return first, f"deadline {at} in {left}: one look more than 48h before it"
    if gap >= remaining:
        return _last_look(c, lo, deadline, f"deadline {at} in {left}")
    binding = gap < interval
    note = f"deadline {at} in {left}: looking every {format_duration(gap)}" if binding else why
    placed = _place(c, now + gap, lo, deadline)
    if placed is None:
        return _last_look(c, lo, deadline, f"deadline {at} in {left}")
    if placed > now + gap:
        note = _quiet_note(c, now + gap, note)
    elif placed < now + gap:  # the quiet hours run into the deadline: look before they begin
        note = f"{note}; at {_when(c, placed)}, before the quiet hours"
    return placed, note


def _last_look(c: Cadence, lo: float, deadline: float, head: str) -> tuple[float, str]:
    """The look at the deadline; if it falls in quiet hours, just before they begin (when that is
    not sooner than `lo`), else when they end — the one look allowed after the deadline."""
    if in_quiet(c, deadline):
        before = _awake_before(c, deadline, lo)
        if before is not None:
            return before, f"{head}: a last look at {_when(c, before)}, before the quiet hours"
    return leave_quiet(c, deadline), _quiet_note(
        c, deadline, f"{head}: a last look at the deadline"
    )


def _place(c: Cadence, t: float, lo: float, hi: float) -> float | None:
    """`t` moved out of quiet hours within [lo, hi), to whichever side is nearer — a look due at
    22:10 is better at 21:30 the same evening than at 08:00 the next day so close to a deadline;
    None if the whole span is quiet."""
    later = leave_quiet(c, t)
    earlier = _awake_before(c, t, lo)
    if later >= hi:
        return earlier
    if earlier is not None and t - earlier < later - t:
        return earlier
    return later


__all__ = [
    "Cadence",
    "cadence_from",
    "format_duration",
    "in_quiet",
    "leave_quiet",
    "next_look",
    "parse_duration",
    "parse_quiet",
    "quiet_start",
]
