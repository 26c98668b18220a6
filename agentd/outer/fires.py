"""Due times recorded as `checkins` rows, in the write transaction of the tick that found them.

A schedule's fires run on time, or follow its misfire policy when found late (skipped, coalesced
into one catch-up, capped), and a snoozed goal's are recorded missed — every missed fire with its
reason. A goal's due cadence look is recorded too, or moved to the end of quiet hours.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog

from agentd.db import checkins as qc
from agentd.db import schedules as qs
from agentd.db.checkins import CheckinStatus
from agentd.outer import cadence, schedule
from agentd.outer.schedule import ScheduleSpec

log = structlog.get_logger("agentd.outer")


def spec_of(s: qs.Schedule) -> ScheduleSpec:
    """A schedule row as the time math reads it (ValueError if the row is malformed)."""
    return schedule.parse_spec(
        s.kind, s.spec, s.tz, misfire=s.misfire, misfire_cap=s.misfire_cap,
        max_lateness_s=s.max_lateness_s, jitter_s=s.jitter_s,
    )  # fmt: skip


def when(t: float, tz: str = "UTC") -> str:
    """A time for a reason or a log line: `Tue 2026-03-03 09:00 Europe/Berlin`."""
    return datetime.fromtimestamp(t, schedule.zone(tz)).strftime(f"%a %Y-%m-%d %H:%M {tz}")


class Fires:
    """Records one tick's due times; a schedule whose row no longer parses is skipped, logged once."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s  # at most this late, a fire found while the daemon runs is on time
        self.invalid: set[int] = set()  # schedules whose row no longer parses (logged once)

    def record_schedule(
        self,
        c: Any,
        sched: qs.Schedule,
        cadence_row: dict[str, Any] | None,
        now: float,
        caught_up_by: int | None,
        starting: bool,
    ) -> tuple[int, bool]:
        """Record one schedule's due times; returns (new rows, whether a late fire runs)."""
        try:
            spec = spec_of(sched)
        except ValueError as e:  # e.g. its time zone left the system's tzdata: skip, loudly
            if sched.schedule_id not in self.invalid:
                self.invalid.add(sched.schedule_id)
                log.error("schedule.invalid", schedule_id=sched.schedule_id, error=str(e))
            return 0, False
        grace = 0.0 if starting else self._grace(spec, sched)
        cu = schedule.catch_up(
            spec, sched.last_fired_at, now, sched.goal_id, sched.created_at, grace_s=grace
        )
        row = cadence_row or {}
        snoozed = float(row.get("snoozed_until") or 0.0)
        run, missed = [], [(t, _missed_reason(spec, t, cu, now)) for t in cu.skipped]
        for t in cu.run:
            if t < snoozed:
                missed.append((t, f"goal snoozed until {when(snoozed, spec.tz)}"))
            elif caught_up_by is not None and spec.misfire == "once" and now - t > grace:
                missed.append((t, f"coalesced into schedule {caught_up_by}'s catch-up"))
            else:
                run.append(t)
        uncounted = cu.skipped_count - len(cu.skipped)
        if uncounted and missed:
            first, reason = missed[0]
            missed[0] = (first, f"{reason}; {uncounted} earlier fires were missed too "
                                "(counted, not listed)")  # fmt: skip
        nxt = schedule.next_fire(spec, now, sched.goal_id, sched.created_at)
        new_due, written = qs.record_fires(
            c, sched, run=run, missed=missed, now=now, next_fire_at=nxt
        )
        for checkin_id, t in zip(new_due, run, strict=False):
            log.info("checkin.fired", goal_id=sched.goal_id, schedule_id=sched.schedule_id,
                     checkin_id=checkin_id, due_at=when(t, spec.tz), late_s=round(now - t, 1))  # fmt: skip
        if missed:
            log.info("checkin.missed", goal_id=sched.goal_id, schedule_id=sched.schedule_id,
                     count=len(missed) + uncounted, policy=spec.misfire, ran=len(run))  # fmt: skip
        return written, any(now - t > grace for t in run)

    def _grace(self, spec: ScheduleSpec, sched: qs.Schedule) -> float:
        """How late a fire may be found while the daemon runs and still be on time: a few poll
        intervals, but under half the schedule's gap, so two fires never both pass as on time.
        At start it is 0: whatever fell due while the daemon was down follows the misfire policy."""
        first = schedule.next_fire(spec, sched.last_fired_at or sched.created_at, sched.goal_id,
                                   sched.created_at)  # fmt: skip
        gap = schedule.next_fire(spec, first, sched.goal_id, sched.created_at) - first
        return min(self.grace_s, gap / 2)

    def record_look(
        self, c: Any, goal_id: int, next_at: float, cad: cadence.Cadence, now: float,
        caught_up_by: int | None,
    ) -> int:  # fmt: skip
        """The goal's cadence look is due: record it — unless a schedule's catch-up in this same
        tick already looks at the goal (one catch-up per goal per outage, even when that catch-up
        waits for quiet hours to end), or quiet hours hold now (then the look moves to their
        end, e.g. after a restart at night)."""
        if caught_up_by is not None:
            reason = f"coalesced into schedule {caught_up_by}'s catch-up"
            qc.add_due(c, goal_id, next_at, now, None, CheckinStatus.MISSED, reason)
            log.info("checkin.missed", goal_id=goal_id, count=1, reason=reason)
            return 1
        if cadence.in_quiet(cad, now):
            until = cadence.leave_quiet(cad, now)
            why = f"quiet hours until {datetime.fromtimestamp(until, schedule.zone(cad.tz)):%H:%M}"
            qc.set_next(
                c, goal_id, until, f"{why}: the look due {when(next_at, cad.tz)} waits", now
            )
            log.info("checkin.deferred", goal_id=goal_id, until=when(until, cad.tz), why=why)
            return 0
        checkin_id = qc.add_due(c, goal_id, next_at, now)
        if checkin_id is None:
            return 0
        log.info("checkin.fired", goal_id=goal_id, checkin_id=checkin_id, due_at=when(next_at),
                 late_s=round(now - next_at, 1), by="cadence")  # fmt: skip
        return 1


def _missed_reason(spec: ScheduleSpec, t: float, cu: schedule.CatchUp, now: float) -> str:
    late = cadence.format_duration(now - t)
    if t < cu.stale_before:
        limit = cadence.format_duration(spec.max_lateness_s)
        return f"missed ({late} late, past the {limit} max lateness)"
    if spec.misfire == "skip":
        return f"missed ({late} late; misfire = skip)"
    if spec.misfire == "once":
        return f"missed ({late} late; misfire = once: coalesced into the latest)"
    return f"missed ({late} late; misfire = all, beyond the cap of {spec.misfire_cap})"
