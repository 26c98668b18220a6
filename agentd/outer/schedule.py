"""When a goal's check-in fires are due: cron or interval schedules in an IANA time zone, a stable
per-goal jitter, and the misfire policy after downtime (skip / once / all, with a max lateness).
Pure time math on unix seconds: no database, no clock — the caller passes `now`.

Cron is evaluated here, not by APScheduler: its CronTrigger fires a 02:30 job twice on a fall-back
day and numbers weekdays 0=Monday. Ours is Vixie cron's DST rule (and cronsim's, whose DST cases
tests/outer/test_cron_corpus.py keeps): 0 and 7 are Sunday; a job whose hour field starts with `*`
(`*`, `*/3`) fires at every real hour it names — a wall time the spring-forward jump skips does
not fire, and one the fall back repeats fires twice; any other job fires once per wall time — a
skipped one when the clock jumps past it, a repeated one at its first occurrence. The expression
itself (fields, names, steps, macros) is `crontab`'s."""

from __future__ import annotations

import bisect
import collections
import functools
import hashlib
import math
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal

from agentd.outer import crontab

Misfire = Literal["skip", "once", "all"]
MISFIRES: tuple[Misfire, ...] = ("skip", "once", "all")
# catch_up lists at most this many skipped due times (the newest); `skipped_count` has them all.
SKIPPED_LIMIT = 1000
# How far ahead a cron spec is searched for its next fire (Feb 29 skips 8 years around 2100).
_SEARCH_DAYS = 366 * 12


@dataclass(frozen=True)
class ScheduleSpec:
    kind: Literal["cron", "interval"]
    spec: str  # crontab "0 9 * * mon-fri" (weekday numbers rewritten as names) or seconds "86400"
    tz: str = "UTC"  # cron is evaluated in this zone; intervals are elapsed seconds
    misfire: Misfire = "once"  # fires missed while the daemon was down
    misfire_cap: int = 3  # with misfire = "all": at most this many catch-ups
    max_lateness_s: float = 86400.0  # older missed fires are recorded as skipped
    jitter_s: float = 0.0  # a stable per-goal offset in [0, jitter_s)


@dataclass(frozen=True)
class CatchUp:
    """Every due time in (last_fired, now] is in exactly one of `run` / `skipped` — or, beyond
    SKIPPED_LIMIT skipped ones, counted in `skipped_count` (which always counts all of them)."""

    run: list[float]  # due times to fire now, oldest first
    # due times to record as skipped, oldest first (the newest SKIPPED_LIMIT of them)
    skipped: list[float]
    skipped_count: int = -1  # all skipped due times, listed or not (-1: len(skipped))
    stale_before: float = -math.inf  # skipped due times before this were too late (max_lateness_s)

    def __post_init__(self) -> None:
        if self.skipped_count < 0:
            object.__setattr__(self, "skipped_count", len(self.skipped))

    @property
    def truncated(self) -> bool:
        """True when some skipped due times are only counted (a long outage of a frequent schedule)."""
        return self.skipped_count > len(self.skipped)


# --- parsing -----------------------------------------------------------------------------------


def zone(tz: str) -> zoneinfo.ZoneInfo:
    """The IANA zone, or a ValueError that says what to write."""
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f'time zone "{tz}" is not an IANA name: use e.g. "Europe/Berlin", "America/New_York", "UTC"'
        ) from None


def parse_spec(
    kind: str,
    spec: str,
    tz: str,
    *,
    misfire: str = "once",
    misfire_cap: int = 3,
    max_lateness_s: float = 86400.0,
    jitter_s: float = 0.0,
) -> ScheduleSpec:
    """A validated ScheduleSpec; ValueError with a message that teaches the right form."""
    zone(tz)
    if misfire not in MISFIRES:
        raise ValueError(f'misfire policy "{misfire}" is not one of skip, once, all')
    if misfire_cap < 1:
        raise ValueError(f"misfire cap {misfire_cap} must be at least 1")
    longest = 10 * 365 * 86400.0  # ten years: beyond, fire times leave what datetimes can show
    if not 0 < max_lateness_s <= longest or not 0 <= jitter_s <= longest:
        raise ValueError("max lateness must be positive and jitter not negative, both ≤ 10 years")
    if kind == "cron":
        crontab.parse(spec)
        normal: str = crontab.normal(spec)
    elif kind == "interval":
        try:
            every_s = float(spec)
        except ValueError:
            raise ValueError(f'interval "{spec}" must be seconds, e.g. "86400" for a day') from None
        if not math.isfinite(every_s) or not 1 <= every_s <= longest:
            raise ValueError(f'interval "{spec}" must be at least 1 second and at most 10 years')
        normal = str(int(every_s)) if every_s.is_integer() else repr(every_s)
    else:
        raise ValueError(f'schedule kind "{kind}" is not "cron" or "interval"')
    return ScheduleSpec(
        kind="cron" if kind == "cron" else "interval",
        spec=normal,
        tz=tz,
        misfire=misfire,
        misfire_cap=misfire_cap,
        max_lateness_s=float(max_lateness_s),
        jitter_s=float(jitter_s),
    )


# --- wall time → instants ----------------------------------------------------------------------


def local_instant(
    d: date, seconds_of_day: int, tz: zoneinfo.ZoneInfo, *, first: bool = True
) -> float:
    """The earliest instant at which the wall clock in `tz` on date `d` reads `seconds_of_day` — or,
    if that wall time does not exist (spring forward), the instant the clock jumps past it. With
    `first=False` an ambiguous wall time (fall back) gives its second occurrence."""
    naive = datetime.combine(d, time()) + timedelta(seconds=seconds_of_day)
    a = naive.replace(tzinfo=tz, fold=0).timestamp()
    b = naive.replace(tzinfo=tz, fold=1).timestamp()
    lo, hi = min(a, b), max(a, b)
    if lo == hi or _wall(lo, tz) == naive:  # unique, or ambiguous: both occurrences exist
        return lo if first else hi
    # a gap: the local clock jumps from before `naive` to after it somewhere in (lo, hi)
    lo_i, hi_i = math.floor(lo), math.ceil(hi)
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        lo_i, hi_i = (mid, hi_i) if _wall(mid, tz) < naive else (lo_i, mid)
    return float(hi_i)


def _wall(t: float, tz: zoneinfo.ZoneInfo) -> datetime:
    return datetime.fromtimestamp(t, tz).replace(tzinfo=None)


def local_date(t: float, tz: zoneinfo.ZoneInfo) -> date:
    return datetime.fromtimestamp(t, tz).date()


@functools.lru_cache(maxsize=4096)
def _day_fires(cron: crontab.Cron, tz: zoneinfo.ZoneInfo, d: date) -> tuple[float, ...]:
    """The cron's fire instants on local date `d`, sorted (empty if the day does not match)."""
    if not cron.matches(d):
        return ()
    start = local_instant(d, 0, tz)
    end = local_instant(d + timedelta(days=1), 0, tz)
    if end - start == 86400 and _wall(start, tz).hour == 0:  # no DST change today
        return tuple(start + s for s in cron.day_seconds)
    fires: set[float] = set()
    for s in cron.day_seconds:
        naive = datetime.combine(d, time()) + timedelta(seconds=s)
        t = local_instant(d, s, tz)
        if _wall(t, tz) != naive:  # skipped by the spring-forward jump
            if not cron.every_hour:  # a daily 02:30 fires once, at the jump; `*` hours just go on
                fires.add(t)
            continue
        fires.add(t)
        if cron.every_hour:  # the repeated hour of a fall back gets its `*` hour fires too
            fires.add(local_instant(d, s, tz, first=False))
    return tuple(sorted(fires))


def _cron_days(
    cron: crontab.Cron, tz: zoneinfo.ZoneInfo, after: float
) -> Iterator[tuple[float, ...]]:
    """The fire instants day by day from the local day before `after` (a DST jump can move a
    day's fire across midnight), for up to _SEARCH_DAYS days."""
    d = local_date(after, tz) - timedelta(days=1)
    for _ in range(_SEARCH_DAYS):
        fires = _day_fires(cron, tz, d)
        if fires:
            yield fires
        d += timedelta(days=1)


def _cron_next(cron: crontab.Cron, tz: zoneinfo.ZoneInfo, after: float) -> float:
    best: float | None = None
    for days_seen, fires in enumerate(_later(_cron_days(cron, tz, after), after)):
        best = fires[0] if best is None else min(best, fires[0])
        if days_seen >= 1:  # the next matching day too, in case a DST jump reordered them
            break
    if best is None:
        raise ValueError("this cron schedule has no fire in the next 12 years")
    return best


def _later(days: Iterator[tuple[float, ...]], after: float) -> Iterator[tuple[float, ...]]:
    for fires in days:
        i = bisect.bisect_right(fires, after)
        if i < len(fires):
            yield fires[i:]


# --- fires ----------------------------------------------------------------------------------------


def jitter(goal_id: int, jitter_s: float) -> float:
    """A stable per-goal offset in [0, jitter_s): a hash of the goal id, the same in every process."""
    if jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(str(goal_id).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * jitter_s


def next_fire(s: ScheduleSpec, after: float, goal_id: int, anchor: float | None = None) -> float:
    """The first fire strictly after `after`, jitter included. Interval fires are anchor + k·every
    (k ≥ 1; anchor = the schedule's created_at, 0 if None); cron fires are wall times in s.tz."""
    j = jitter(goal_id, s.jitter_s)
    if s.kind == "interval":
        every_s, origin = float(s.spec), (anchor or 0.0) + j
        k = max(1, math.floor((after - origin) / every_s) + 1)
        while origin + k * every_s <= after:  # float rounding
            k += 1
        return origin + k * every_s
    return _cron_next(crontab.parse(s.spec), zone(s.tz), after - j) + j


def fires_between(
    s: ScheduleSpec, after: float, until: float, goal_id: int, anchor: float | None = None
) -> Iterator[float]:
    """Every fire in (after, until], oldest first."""
    t = after
    while True:
        t = next_fire(s, t, goal_id, anchor)
        if t > until:
            return
        yield t


def _due(
    s: ScheduleSpec, after: float, now: float, goal_id: int, anchor: float, keep: int
) -> tuple[int, list[float]]:
    """How many fires fall in (after, now], and the newest `keep` of them, oldest first — without
    listing a year of minutes."""
    j = jitter(goal_id, s.jitter_s)
    if s.kind == "interval":
        every_s, origin = float(s.spec), anchor + j
        first = next_fire(s, after, goal_id, anchor)
        if first > now:
            return 0, []
        k0 = round((first - origin) / every_s)
        k1 = math.floor((now - origin) / every_s)
        while origin + k1 * every_s > now:
            k1 -= 1
        ks = range(max(k0, k1 - keep + 1), k1 + 1)
        return k1 - k0 + 1, [origin + k * every_s for k in ks]
    cron, tz = crontab.parse(s.spec), zone(s.tz)
    count, tail = 0, collections.deque[float](maxlen=keep)
    last_day = local_date(now - j, tz) + timedelta(days=1)
    for fires in _later(_cron_days(cron, tz, after - j), after - j):
        if local_date(fires[0], tz) > last_day:
            break
        within = fires[: bisect.bisect_right(fires, now - j)]
        count += len(within)
        tail.extend(f + j for f in within)
    return count, sorted(tail)


def catch_up(
    s: ScheduleSpec,
    last_fired: float | None,
    now: float,
    goal_id: int,
    anchor: float,
    *,
    grace_s: float = 0.0,
) -> CatchUp:
    """Sort the due times in (last_fired or anchor, now] into run and skipped, by the misfire policy.
    Due times older than s.max_lateness_s are skipped whatever the policy. Due times at most
    `grace_s` old are on time, not missed: they run under every policy (missed ones then coalesce
    into them under "once", and fill up to the cap under "all")."""
    keep = SKIPPED_LIMIT + max(s.misfire_cap, 1)
    count, due = _due(s, anchor if last_fired is None else last_fired, now, goal_id, anchor, keep)
    stale_before = now - s.max_lateness_s
    on_time = [t for t in due if now - t <= grace_s]
    late = [t for t in due if t >= stale_before and now - t > grace_s]
    if s.misfire == "skip":
        run = on_time
    elif s.misfire == "once":
        run = on_time or late[-1:]
    else:
        room = s.misfire_cap - len(on_time)
        run = (late[-room:] if room > 0 else []) + on_time
    chosen = set(run)
    skipped = [t for t in due if t not in chosen][-SKIPPED_LIMIT:]
    return CatchUp(run, skipped, count - len(run), stale_before)
