"""The one answer to "when is this goal's next check-in, and why?": the earliest of its waiting
check-in rows, its schedules' next fires and its cadence look — each at the time the daemon will
run it (a schedule's jitter included, a fire inside quiet hours at their end, a fire during a
snooze skipped, a fire missed while the daemon was down by its misfire policy).
Pure: the caller passes the rows as plain data and `now` (unix seconds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agentd.outer import cadence, schedule
from agentd.outer.cadence import Cadence
from agentd.outer.schedule import ScheduleSpec


@dataclass(frozen=True)
class Fire:
    """A schedule as the planner reads it."""

    schedule_id: int
    spec: ScheduleSpec
    created_at: float
    last_fired_at: float | None
    next_fire_at: float | None  # as the daemon recorded it; ≤ now: due, not yet recorded


@dataclass(frozen=True)
class Waiting:
    """A check-in row not yet done (due, deciding or decided)."""

    checkin_id: int
    schedule_id: int | None
    due_at: float
    retry_at: float | None = None  # a model error's backoff


@dataclass(frozen=True)
class Look:
    """The cadence's planned look (the `cadences` row)."""

    at: float
    why: str
    jitter_s: float = 0.0  # the agent's jitter: a look moved to the end of quiet hours gets it


@dataclass(frozen=True)
class Next:
    at: float
    why: str
    by: str  # "cadence", "schedule 2" or "check-in 7"
    tz: str = "UTC"  # the goal's cadence zone: where the surfaces show `at`


def hm(t: float, tz: str) -> str:
    """`Thu 09:07` in `tz`: how a reason names a time."""
    return datetime.fromtimestamp(t, schedule.zone(tz)).strftime("%a %H:%M")


def jitter_text(j: float) -> str:
    """Whole minutes, cut like the `HH:MM` they are added to (a 9 min 29 s jitter on 23:00 is
    shown 23:09)."""
    return f"{int(j // 60)} min" if j >= 60 else f"{j:.0f} s"


def next_checkin(
    now: float,
    goal_id: int,
    cad: Cadence | None,
    *,
    look: Look | None,
    fires: Sequence[Fire] = (),
    waiting: Sequence[Waiting] = (),
    snoozed_until: float | None = None,
) -> Next | None:
    """The goal's next check-in (None: nothing is planned). Ties go to a waiting check-in, then a
    schedule, then the cadence: the one the daemon would run."""
    snooze = snoozed_until if snoozed_until is not None and snoozed_until > now else None
    # A check-in recorded before a snooze is skipped when it comes up, not run.
    found: list[Next] = [] if snooze else [_waiting(now, cad, w) for w in waiting]
    found += [n for f in fires if (n := _fire(now, goal_id, cad, f, snooze)) is not None]
    if look is not None:
        found.append(_look(now, goal_id, cad, look))
    if not found:
        return None
    first = min(found, key=lambda n: n.at)
    return first if cad is None else replace(first, tz=cad.tz)


def _quiet_end(cad: Cadence | None, t: float) -> float:
    return cadence.leave_quiet(cad, t) if cad is not None else t


def _waiting(now: float, cad: Cadence | None, w: Waiting) -> Next:
    start = max(now, w.due_at, w.retry_at or 0.0)
    at = _quiet_end(cad, start)
    by = "the cadence" if w.schedule_id is None else f"schedule {w.schedule_id}"
    why = f"check-in {w.checkin_id} ({by}) is due"
    if w.retry_at is not None and w.retry_at > now:
        why += ", retrying after a model error"
    if at > start and cad is not None:
        why += f"; it waits for the quiet hours to end at {hm(at, cad.tz)}"
    return Next(at, why, f"check-in {w.checkin_id}")


def _fire(
    now: float, goal_id: int, cad: Cadence | None, f: Fire, snooze: float | None
) -> Next | None:
    s = f.spec
    what = f"schedule {f.schedule_id} ({_spec_text(s)})"
    if f.next_fire_at is not None and f.next_fire_at <= now:
        # Due but not yet recorded (the daemon is down, or about to tick): the misfire policy.
        cu = schedule.catch_up(s, f.last_fired_at, now, goal_id, f.created_at)
        ran = [t for t in cu.run if snooze is None or t >= snooze]
        if ran:
            at = _quiet_end(cad, now)
            why = f"{what}: its fire of {hm(ran[-1], s.tz)} is due"
            if now - ran[-1] > 1.0:
                why += f" (late; misfire = {s.misfire}: it runs at the daemon's next tick)"
            if at > now and cad is not None:
                why += f"; it waits for the quiet hours to end at {hm(at, cad.tz)}"
            return Next(at, why, f"schedule {f.schedule_id}")
    after = max(now, f.last_fired_at or now)
    if snooze is not None:
        after = max(after, snooze - 1e-3)  # fires during a snooze are recorded missed
    try:
        fire = schedule.next_fire(s, after, goal_id, f.created_at)
    except ValueError:
        return None  # no fire in the years searched: the outlook's table says so
    at = _quiet_end(cad, fire)
    j = schedule.jitter(goal_id, s.jitter_s)
    shown = hm(fire, s.tz)
    if j >= 1.0:
        shown += f" ({hm(fire - j, s.tz)} + this goal's {jitter_text(j)} jitter)"
    if at > fire and cad is not None:
        why = (
            f"{what}: its fire at {shown} falls in the quiet hours ({_quiet_text(cad)}), "
            f"so it runs when they end at {hm(at, cad.tz)}"
        )
    else:
        why = f"{what}: {shown}"
    if snooze is not None and fire >= snooze:
        why += f"; the first fire after the snooze until {hm(snooze, s.tz)}"
    return Next(at, why, f"schedule {f.schedule_id}")


def _look(now: float, goal_id: int, cad: Cadence | None, look: Look) -> Next:
    start = max(now, look.at)
    at = _quiet_end(cad, start)
    why = look.why
    if at > start and cad is not None:
        why += f"; it waits for the quiet hours to end at {hm(at, cad.tz)}"
    j = schedule.jitter(goal_id, look.jitter_s)
    if cad is not None and j >= 1.0 and at == look.at and _after_quiet(cad, at - j):
        # checkin.spread moved a look at the end of quiet hours by the goal's jitter
        why += f" — {hm(at, cad.tz)} ({hm(at - j, cad.tz)} + this goal's {jitter_text(j)} jitter)"
    return Next(at, why, "cadence")


def _after_quiet(cad: Cadence, t: float) -> bool:
    """`t` is the end of quiet hours (a look placed there by leave_quiet)."""
    return cadence.in_quiet(cad, t - 1.0) and not cadence.in_quiet(cad, t)


def _spec_text(s: ScheduleSpec) -> str:
    if s.kind == "cron":
        return f"{s.spec} {s.tz}"
    return f"every {cadence.format_duration(float(s.spec))}"


def _quiet_text(cad: Cadence) -> str:
    assert cad.quiet is not None
    (a, b) = cad.quiet
    return f"{a // 60:02d}:{a % 60:02d}-{b // 60:02d}:{b % 60:02d} {cad.tz}"
