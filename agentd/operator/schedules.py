"""The operator's say over when a goal checks in: cadence overrides, snoozes and schedules — each
one short transaction that also re-plans the goal's next look — and the outlook `goal show` and
`goal schedule` print (the next check-in and why, the cadence in force, schedules, memory).

Times are the home's (agentd/db/stamp.py): the wall, or the simulated clock of a `--clock-speed` run.
Bad input raises ValueError with a message that teaches the right form; the CLI adds the example.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import schedules as qs
from agentd.db.store import SyncStore
from agentd.errors import ConfigError, Refused
from agentd.models import JSON, Goal, GoalStatus
from agentd.operator.home import now_s
from agentd.outer import cadence, schedule

if TYPE_CHECKING:
    from agentd.config import AgentConfig, Config
    from agentd.outer import planner

INTERVAL_JITTER_SHARE = 0.1  # an interval schedule's jitter is at most this share of its interval


home_now = now_s  # the home's now, unix seconds (operator/home.py)


def _agent(cfg: Config, goal: Goal) -> AgentConfig:
    agent = cfg.agents.get(goal.agent)
    if agent is None:
        raise ConfigError(f"goal {goal.goal_id}'s agent {goal.agent!r} is not in config.toml")
    return agent


def _replan(c: Any, cfg: Config, goal: Goal, now: float, cause: str) -> tuple[float, str] | None:
    """Plan the goal's next look again from now (after the operator changed its cadence)."""
    from agentd.outer import checkin  # the check-in's model side: only when one is re-planned

    agent = _agent(cfg, goal)
    if goal.status != GoalStatus.ACTIVE or not agent.checkin.enabled:
        return None
    t, why = checkin.next_look(c, agent, goal, now, None)
    why = f"{cause}: {why}"
    qc.set_next(c, goal.goal_id, t, why, now)
    return t, why


# ── cadence and snooze ──────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class CadenceChange:
    every_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    quiet: str | None = None  # "22:00-08:00" or "none"
    tz: str | None = None
    reset: bool = False  # back to the agent's defaults (and no backoff)

    def fields(self) -> dict[str, Any]:
        keys = ("every_s", "min_s", "max_s", "quiet", "tz")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}


def _check_cadence(agent: AgentConfig, row: JSON | None, change: CadenceChange) -> None:
    """Refuse an incoherent cadence instead of quietly mending it."""
    if change.quiet is not None:
        cadence.parse_quiet(change.quiet)
    if change.tz is not None:
        schedule.zone(change.tz)
    for key in ("every_s", "min_s", "max_s"):
        given = getattr(change, key)
        if given is not None and given <= 0:
            raise ValueError(f"--{key[:-2]} must be longer than 0 seconds")
    base = {} if change.reset or row is None else row

    def value(key: str) -> float:
        new = getattr(change, key)
        if new is not None:
            return float(new)
        old = base.get(key)
        return float(old) if old is not None else float(getattr(agent.checkin, key))

    every, low, high = value("every_s"), value("min_s"), value("max_s")
    if not low <= every <= high:
        f = cadence.format_duration
        raise ValueError(
            f"the cadence must keep min ≤ every ≤ max; this gives min {f(low)}, every {f(every)},"
            f" max {f(high)}"
        )


def set_cadence(store: SyncStore, cfg: Config, goal_id: int, change: CadenceChange) -> JSON:
    now = home_now(store)

    def work(c: Any) -> JSON:
        goal = q.get_goal(c, goal_id)
        agent = _agent(cfg, goal)
        row = qc.cadence_row(c, goal_id)
        _check_cadence(agent, row, change)
        if change.reset:
            qs.reset_cadence(c, goal_id, now)
        qs.set_overrides(c, goal_id, now, **change.fields())
        _replan(c, cfg, goal, now, "cadence changed")
        return _outlook(c, cfg, goal, now)

    return store.write(work)


def snooze(store: SyncStore, cfg: Config, goal_id: int, seconds: float) -> JSON:
    """No check-in of the goal before now + `seconds` (0 ends a snooze)."""
    if seconds < 0:
        raise ValueError("a snooze must be 0 (to end it) or longer")
    now = home_now(store)

    def work(c: Any) -> JSON:
        goal = q.get_goal(c, goal_id)
        if goal.status in (GoalStatus.ACHIEVED, GoalStatus.ABANDONED):
            raise Refused(f"goal {goal_id} is {goal.status}; it checks in no more")
        qs.set_overrides(c, goal_id, now, snoozed_until=now + seconds if seconds else None)
        _replan(c, cfg, goal, now, "snoozed" if seconds else "snooze ended")
        return _outlook(c, cfg, goal, now)

    return store.write(work)


# ── schedules ───────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class NewSchedule:
    kind: str  # "cron" | "interval"
    spec: str  # crontab, or seconds as text
    tz: str | None = None
    misfire: str | None = None
    misfire_cap: int | None = None
    max_lateness_s: float | None = None


def add_schedule(store: SyncStore, cfg: Config, goal_id: int, new: NewSchedule) -> JSON:
    now = home_now(store)

    def work(c: Any) -> JSON:
        goal = q.get_goal(c, goal_id)
        if goal.status in (GoalStatus.ACHIEVED, GoalStatus.ABANDONED):
            raise Refused(f"goal {goal_id} is {goal.status}; it checks in no more")
        ci = _agent(cfg, goal).checkin
        jitter_s = ci.jitter_s
        if new.kind == "interval":
            jitter_s = min(jitter_s, float(new.spec) * INTERVAL_JITTER_SHARE)
        # The goal's own zone (goal cadence --tz) before the agent's default.
        goal_tz = (qc.cadence_row(c, goal_id) or {}).get("tz")
        spec = schedule.parse_spec(
            new.kind, new.spec, new.tz or goal_tz or ci.tz, misfire=new.misfire or ci.misfire,
            misfire_cap=new.misfire_cap or ci.misfire_cap,
            max_lateness_s=new.max_lateness_s or ci.max_lateness_s, jitter_s=jitter_s,
        )  # fmt: skip
        first = schedule.next_fire(spec, now, goal_id, now)
        schedule_id = qs.add(
            c, goal_id, kind=spec.kind, spec=spec.spec, tz=spec.tz, misfire=spec.misfire,
            misfire_cap=spec.misfire_cap, max_lateness_s=spec.max_lateness_s,
            jitter_s=spec.jitter_s, now=now,
            next_fire_at=first if goal.status == GoalStatus.ACTIVE else None,  # paused: parked
        )  # fmt: skip
        return {"schedule_id": schedule_id, **_outlook(c, cfg, goal, now)}

    return store.write(work)


def remove_schedule(store: SyncStore, cfg: Config, goal_id: int, schedule_id: int) -> JSON:
    now = home_now(store)

    def work(c: Any) -> JSON:
        goal = q.get_goal(c, goal_id)
        qs.remove(c, goal_id, schedule_id)
        return _outlook(c, cfg, goal, now)

    return store.write(work)


# ── the outlook ─────────────────────────────────────────────────────────────────────────────────


def outlook(store: SyncStore, cfg: Config, goal_id: int) -> JSON:
    now = home_now(store)
    return store.read(lambda c: _outlook(c, cfg, q.get_goal(c, goal_id), now))


def _outlook(c: Any, cfg: Config, goal: Goal, now: float) -> JSON:
    """Everything about when the goal checks in, as plain data (times: unix seconds)."""
    from agentd.operator import failures
    from agentd.outer import memory
    from agentd.outer.fires import spec_of

    agent = cfg.agents.get(goal.agent)
    row = qc.cadence_row(c, goal.goal_id) or {}
    out: JSON = {
        "now": now,
        "enabled": bool(agent and agent.checkin.enabled),
        "status": str(goal.status),
        "next_at": row.get("next_at"),
        "next_why": row.get("next_why"),
        "snoozed_until": row.get("snoozed_until"),
        "backoff": int(row.get("backoff") or 0),
        "overrides": {
            k: row[k] for k in qs.OVERRIDES if row.get(k) is not None and k != "snoozed_until"
        },
        "schedules": [],
        "memory": memory.recall(c, goal.goal_id),
        "recent": [_checkin_json(x) for x in qc.list_checkins(c, goal.goal_id, limit=5)],
        "failing": failures.of_goal(c, goal),  # its check-ins failing in a row, or None
    }
    cad = cadence.cadence_from(agent.checkin, row or None) if agent is not None else None
    if agent is not None and cad is not None:
        out["cadence"] = {
            "every_s": cad.every_s, "min_s": cad.min_s, "max_s": cad.max_s,
            "quiet": _quiet_text(cad.quiet), "tz": cad.tz, "model": agent.checkin.model or agent.model,
        }  # fmt: skip
    for s in qs.of_goal(c, goal.goal_id):
        entry: JSON = {
            "schedule_id": s.schedule_id, "kind": s.kind, "spec": s.spec, "tz": s.tz,
            "misfire": s.misfire, "misfire_cap": s.misfire_cap, "max_lateness_s": s.max_lateness_s,
            "jitter_s": s.jitter_s, "last_fired_at": s.last_fired_at, "next_fire_at": None,
            "goal_jitter_s": schedule.jitter(s.goal_id, s.jitter_s),  # this goal's offset
        }  # fmt: skip
        try:
            spec = spec_of(s)
            after = max(now, s.last_fired_at or now)
            entry["next_fire_at"] = schedule.next_fire(spec, after, s.goal_id, s.created_at)
            # When it will run: fires during a snooze are only recorded; quiet hours defer.
            after = max(after, (row.get("snoozed_until") or 0.0) - 1e-3)
            fire = schedule.next_fire(spec, after, s.goal_id, s.created_at)
            entry["runs_at"] = cadence.leave_quiet(cad, fire) if cad else fire
        except ValueError as e:
            entry["error"] = str(e)
        out["schedules"].append(entry)
    _plan_next(c, out, agent, goal, cad, row, now)
    return out


_OPEN = frozenset(("due", "deciding", "decided"))


def _plan_next(
    c: Any, out: JSON, agent: AgentConfig | None, goal: Goal, cad: cadence.Cadence | None,
    row: JSON, now: float,
) -> None:  # fmt: skip
    """The next check-in as every surface shows it (`planner.next_checkin`): `next_at` /
    `next_why` / `next_by`; the cadence's own planned look stays as `look_at` / `look_why`."""
    out["look_at"], out["look_why"] = out.pop("next_at"), out.pop("next_why")
    out["next_at"] = out["next_why"] = out["next_by"] = None
    found = _planned(c, agent, goal, cad, row, now)
    if found is not None:
        out["next_at"], out["next_why"], out["next_by"] = found.at, found.why, found.by


def next_checkin(c: Any, cfg: Config, goal: Goal, now: float) -> planner.Next | None:
    """The goal's next check-in and why, as `goal show` plans it (`agentd status` lists these)."""
    agent = cfg.agents.get(goal.agent)
    row = qc.cadence_row(c, goal.goal_id) or {}
    cad = cadence.cadence_from(agent.checkin, row or None) if agent is not None else None
    return _planned(c, agent, goal, cad, row, now)


def _planned(
    c: Any, agent: AgentConfig | None, goal: Goal, cad: cadence.Cadence | None, row: JSON,
    now: float,
) -> planner.Next | None:  # fmt: skip
    from agentd.outer import planner
    from agentd.outer.fires import spec_of

    if agent is None or not agent.checkin.enabled or goal.status != GoalStatus.ACTIVE:
        return None
    fires = []
    for s in qs.of_goal(c, goal.goal_id):
        try:
            spec = spec_of(s)
        except ValueError:
            continue  # its row no longer parses: the daemon skips it (the table says why)
        fires.append(planner.Fire(s.schedule_id, spec, s.created_at, s.last_fired_at,
                                  s.next_fire_at))  # fmt: skip
    waiting = [
        planner.Waiting(x.checkin_id, x.schedule_id, x.due_at, x.precheck.get("retry_at"))
        for x in qc.list_checkins(c, goal.goal_id, limit=20)
        if str(x.status) in _OPEN
    ]
    look_at = row.get("next_at")
    look = None if look_at is None else planner.Look(
        float(look_at), str(row.get("next_why") or "the goal's cadence"), agent.checkin.jitter_s
    )  # fmt: skip
    return planner.next_checkin(
        now, goal.goal_id, cad, look=look, fires=fires, waiting=waiting,
        snoozed_until=row.get("snoozed_until"),
    )  # fmt: skip


def _quiet_text(quiet: tuple[int, int] | None) -> str | None:
    if quiet is None:
        return None
    return f"{quiet[0] // 60:02d}:{quiet[0] % 60:02d}-{quiet[1] // 60:02d}:{quiet[1] % 60:02d}"


def _checkin_json(x: qc.Checkin) -> JSON:
    return {
        "checkin_id": x.checkin_id, "goal_id": x.goal_id, "schedule_id": x.schedule_id,
        "due_at": x.due_at, "fired_at": x.fired_at, "status": str(x.status),
        "reasons": x.precheck.get("reasons", []), "model": x.model, "tokens_in": x.tokens_in,
        "tokens_out": x.tokens_out, "cost_usd": x.cost_usd,
        "verdict": (x.decision or {}).get("verdict"), "effect": x.effect, "next_at": x.next_at,
        "reason": x.reason, "completed_at": x.completed_at,
    }  # fmt: skip


def journal(store: SyncStore, goal_id: int | None, limit: int) -> list[JSON]:
    """The check-in journal, newest first (`agentd checkins`)."""

    def read(c: Any) -> list[JSON]:
        if goal_id is not None:
            q.get_goal(c, goal_id)  # NotFound names the command that lists goals
        return [_checkin_json(x) for x in qc.list_checkins(c, goal_id, limit)]

    return store.read(read)
