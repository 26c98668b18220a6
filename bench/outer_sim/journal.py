"""agentd's check-in journal read back into a run's figures: which fires ran (and whether a model
was asked), catch-ups per outage, silent drops and doubled fires (checked against our own reckoning
of each schedule, not agentd's), repeats held back, the intervals the cadence planned."""

from __future__ import annotations

from typing import Any

from agentd.db import checkins as qc
from bench.outer_sim import metrics
from bench.outer_sim.scenarios import HOUR, Scenario, at_local, local


def read(
    tr: metrics.Trace,
    sc: Scenario,
    rows: list[qc.Checkin],
    plans: list[list[Any]],
    restart_plans: dict[float, int],
    jitter_s: float,
    schedule_ids: list[int],
) -> None:
    """Fill `tr` from the journal. `plans` are the goal's planned looks as observed ([next_at,
    when it was replaced, the replacement's why]); `restart_plans` the looks a restart deferred
    to the end of quiet hours (→ the outage's index); `schedule_ids` the goal's schedules, in the
    scenario's order."""
    ran = sorted(
        (r for r in rows if r.status in ("skipped", "done", "failed")), key=lambda r: r.checkin_id
    )  # the order they ran (a goal's check-ins go one at a time, in id order)
    tr.looks = [(float(r.completed_at or r.fired_at), bool(r.precheck.get("asked")),
                 r.schedule_id is None) for r in ran]  # fmt: skip
    for i, o in enumerate(sc.outages):
        late = [r for r in ran if o.start <= r.due_at < o.end]
        deferred = [r for r in ran if restart_plans.get(r.due_at) == i]
        tr.catchups.append(len(late) + len(deferred))
    drops, tr.doubled = schedule_drops(sc, rows, jitter_s, schedule_ids)
    tr.silent_drops = drops + look_drops(sc, rows, plans)
    tr.extra |= {
        "suppressed": sum(1 for r in rows if (r.effect or {}).get("suppressed")),
        "suppressed_wrongly": wrongly_held(sc, rows, tr.nudges),
        "missed_rows": sum(1 for r in rows if r.status == "missed"),
        "intervals": sorted((float(r.completed_at), r.next_at - r.completed_at) for r in ran
                            if r.next_at is not None and r.completed_at is not None),
    }  # fmt: skip


def wrongly_held(
    sc: Scenario, rows: list[qc.Checkin], nudges: list[tuple[float, str | None]]
) -> int:
    """Nudges agentd held back as repeats that were about a need no earlier nudge was about."""
    n = 0
    for r in rows:
        verdict = (r.decision or {}).get("verdict") or {}
        if (r.effect or {}).get("suppressed") and verdict.get("kind") == "nudge":
            need = sc.need_of(verdict.get("topic") or "")
            earlier = {k for t, k in nudges if t < (r.completed_at or 0)}
            n += need is not None and need.key not in earlier
    return n


def schedule_drops(
    sc: Scenario, rows: list[qc.Checkin], jitter_s: float, schedule_ids: list[int]
) -> tuple[int, int]:
    """Each explicit schedule's fires, by our own reckoning of its crontab in local time (the
    goal's jitter added), against the journal: (fires with no row, fires with two)."""
    drops = doubled = 0
    for n, (_kind, spec, tz) in zip(schedule_ids, sc.schedules, strict=True):
        minute, hour, _, _, dow = spec.split()
        d = local(sc.start, tz).date()
        due = [r.due_at for r in rows if r.schedule_id == n]
        while (t := at_local(d, int(hour), int(minute), tz)) < sc.end - HOUR:
            if t > sc.start and (dow == "*" or local(t, tz).strftime("%a").lower() == dow):
                hits = sum(1 for x in due if t - 1 <= x < t + jitter_s + 1)
                drops += hits == 0
                doubled += max(hits - 1, 0)
            d = d.fromordinal(d.toordinal() + 1)
    return drops, doubled


def look_drops(sc: Scenario, rows: list[qc.Checkin], plans: list[list[Any]]) -> int:
    """Planned cadence looks that came due and neither fired (a journal row) nor were moved for a
    recorded reason (quiet hours at a restart, an operator's change of cadence)."""
    fired = {r.due_at for r in rows if r.schedule_id is None}
    drops = 0
    for at, replaced, why in plans:
        if at > sc.end - HOUR or at in fired:
            continue
        if replaced is not None and (replaced < at or why.startswith(("quiet", "cadence"))):
            continue
        drops += 1
    return drops
