"""The CLI's views of the outer loop: a goal's outlook (the next check-in and why, its cadence,
schedules, memory, recent check-ins) and the check-in journal.

Pure functions over the plain data `agentd.operator.schedules` returns (unix seconds); written text (model
reasons, memory, nudge topics) passes through `safe` / table cells like every other view.
"""

from __future__ import annotations

import contextlib
import zoneinfo
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

from agentd.models import JSON
from agentd.text import jsonable, one_line, safe, urls_shown
from agentd.views import times
from agentd.views.tables import field_lines, table, terminal_width
from agentd.views.times import span

TIME_KEYS = frozenset(
    ("now", "at", "next_at", "look_at", "snoozed_until", "last_fired_at", "next_fire_at", "runs_at",
     "due_at", "fired_at", "completed_at", "created_at", "updated_at", "since", "last_at")
)  # fmt: skip


def as_json(value: Any) -> Any:
    """--json form of the outer loop's data: times (unix seconds inside) as ISO 8601 in UTC,
    like every other --json output."""
    if isinstance(value, dict):
        return {k: _iso(v) if k in TIME_KEYS else as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


def _iso(v: Any) -> Any:
    if isinstance(v, int | float) and not isinstance(v, bool):
        try:
            return jsonable(datetime.fromtimestamp(v, UTC))
        except (ValueError, OverflowError, OSError):  # beyond what a datetime holds
            return v
    return v


def local(t: float | None, tz: str | None = None, now: float | None = None) -> str:
    """`Tue Mar 3 09:00 CET` in `tz` (None: the local zone; UTC when the zone is unknown), the
    year only when it is not `now`'s — the style of every other view (`times.local`)."""
    if t is None:
        return "-"
    zone: tzinfo | None = None
    if tz is not None:
        zone = UTC
        with contextlib.suppress(zoneinfo.ZoneInfoNotFoundError, ValueError):
            zone = zoneinfo.ZoneInfo(tz)
    try:
        at = datetime.fromtimestamp(t, UTC)
        ref = datetime.fromtimestamp(t if now is None else now, UTC)
    except (ValueError, OverflowError, OSError):  # a time beyond what a datetime holds
        return f"{t:.0f} (unix seconds)"
    return times.local(at, ref, zone=zone, weekday=True)


def relative(t: float | None, now: float) -> str:
    """`in 2h`, `5m ago`, `now`: the one style of `times.relative`."""
    if t is None:
        return "-"
    try:
        return times.relative(datetime.fromtimestamp(t, UTC), datetime.fromtimestamp(now, UTC))
    except (ValueError, OverflowError, OSError):  # a time beyond what a datetime holds
        return "-"


def duration(seconds: float) -> str:
    return span(seconds) if seconds >= 1 else f"{seconds:g}s"


def _cadence_line(out: JSON) -> str:
    cad = out.get("cadence")
    if not cad:
        return "- (the goal's agent is not in config.toml)"
    quiet = f"quiet {cad['quiet']}" if cad["quiet"] else "no quiet hours"
    line = (
        f"every {duration(cad['every_s'])} · min {duration(cad['min_s'])} · "
        f"max {duration(cad['max_s'])} · {quiet} · {safe(cad['tz'])} · model {safe(cad['model'])}"
    )
    notes = []
    if out["overrides"]:
        notes.append(
            f"set for this goal: {', '.join(k.removesuffix('_s') for k in out['overrides'])}"
        )
    if out["backoff"]:
        notes.append(
            f"backed off ×{2 ** out['backoff']} after {out['backoff']} unanswered nudge(s)"
        )
    if out["snoozed_until"] and out["snoozed_until"] > out["now"]:
        notes.append(f"snoozed until {local(out['snoozed_until'], cad['tz'], out['now'])}")
    return "\n".join([line, *notes])


def next_line(out: JSON) -> str:
    """The next check-in and why, in one or two lines."""
    tz = (out.get("cadence") or {}).get("tz", "UTC")
    if not out["enabled"]:
        return "- (check-ins are off for this goal's agent: [agents.NAME.checkin] enabled = false)"
    if out["status"] != "active":
        return f"- (the goal is {out['status']})"
    if out["next_at"] is None:  # planned by `agentd.outer.planner` (operator/schedules)
        return "- (planned when the daemon next runs: `agentd serve`)"
    t, why = out["next_at"], safe(out["next_why"] or "")
    due = " — due: the daemon runs it at its next tick" if t <= out["now"] else ""
    return f"{local(t, tz, out['now'])} ({relative(t, out['now'])}){due}\nwhy: {why}"


def _when(s: JSON) -> str:
    if s["kind"] == "cron":
        return f"{safe(s['spec'])} {safe(s['tz'])}"
    return f"every {duration(float(s['spec']))}"


def _jitter(s: JSON) -> str:
    """The schedule's next fire includes this goal's stable jitter offset: say so (in the words
    of `outer.planner`'s reasons)."""
    j = float(s.get("goal_jitter_s") or 0.0)
    if j < 1:
        return ""
    return f", incl. {int(j // 60)} min jitter" if j >= 60 else f", incl. {j:.0f} s jitter"


def _next_fire(s: JSON, now: float) -> str:
    """When the schedule's next check-in runs (the planner's `runs_at`: after a snooze and
    the quiet hours), and its nominal fire when that is not the same instant."""
    runs = s.get("runs_at") or s["next_fire_at"]
    fires = s["next_fire_at"]
    when = f"{local(runs, s['tz'], now)} ({relative(runs, now)})"
    if fires is None or abs(runs - fires) < 1:
        return when + _jitter(s)
    # Deferred: the instant it runs is the end of quiet hours or a snooze, with no jitter in it.
    return f"{when}; due {local(fires, s['tz'], now)}, held"


def schedules_table(out: JSON) -> str:
    rows = [
        (
            s["schedule_id"],
            s["kind"],
            s["spec"] if s["kind"] == "cron" else _when(s),
            s["tz"],
            s["misfire"] + (f" (cap {s['misfire_cap']})" if s["misfire"] == "all" else ""),
            duration(s["max_lateness_s"]),
            s.get("error") or _next_fire(s, out["now"]),
        )
        for s in out["schedules"]
    ]
    headers = ("id", "kind", "when", "tz", "misfire", "max late", "next fire")
    # Narrow terminals keep the spec and the next fire readable; the lateness and misfire
    # policy go first (`goal show --json` has them).
    return table(
        headers, rows, {"when": 30, "next fire": 64}, "none (the cadence alone decides)",
        floors={"when": 20, "next fire": 30}, drop=("max late", "misfire"),
    )  # fmt: skip


def memory_lines(entries: Sequence[JSON], now: float | None = None) -> str:
    if not entries:
        return "nothing yet"
    lines = [f"{local(float(e['at']), None, now)}  {safe(e['kind']):<9} " for e in entries]
    room = terminal_width() or 200  # the text is cut to fit the terminal (at most 100)
    return "\n".join(
        head + one_line(e["text"], max(min(100, room - len(head)), 20))
        for head, e in zip(lines, entries, strict=True)
    )


def failing_line(f: JSON, now: float, tz: str | None = None) -> str:
    """`3 check-ins in a row since Tue Dec 1 12:00 UTC (8h ago)`, the last error and what to do
    (agentd.operator.failures)."""
    n = f["in_a_row"]
    head = f"{n} check-in{'s' if n > 1 else ''} in a row"
    if f["since"] is not None:
        head += f" since {local(f['since'], tz, now)} ({relative(f['since'], now)})"
    last = f" (check-in {f['last_checkin_id']})" if f["last_checkin_id"] else ""
    return f"{head}\nlast error{last}: {safe(f['last_error'])}\nwhat to do: {safe(f['what_to_do'])}"


def outlook_view(out: JSON) -> str:
    fields = [("next check-in", next_line(out)), ("cadence", _cadence_line(out))]
    if out.get("failing"):
        tz = (out.get("cadence") or {}).get("tz", "UTC")
        fields.insert(0, ("failing", failing_line(out["failing"], out["now"], tz)))
    head = field_lines(fields, terminal_width())
    parts = [
        head,
        f"schedules:\n{schedules_table(out)}",
        f"memory:\n{memory_lines(out['memory'], out['now'])}",
    ]
    if out["recent"]:
        parts.append(f"recent check-ins:\n{checkins_table(out['recent'], out['now'])}")
    return "\n\n".join(parts)


def _outcome(x: JSON) -> str:
    verdict = x.get("verdict") or {}
    effect = x.get("effect") or {}
    if verdict:
        kind = verdict.get("kind", "?")
        what = verdict.get("topic") or verdict.get("question") or verdict.get("request") or ""
        held = effect.get("suppressed") or effect.get("skipped")
        item = f" → item {effect['item_id']}" if "item_id" in effect else ""
        run = f" → run {effect['run_id']}" if "run_id" in effect else ""
        what = what or x.get("reason") or ""
        return f"{kind}{item}{run}: {what}" + (f" (held back: {held})" if held else "")
    reasons = "; ".join(x.get("reasons") or [])
    return x.get("reason") or reasons or ""


def _ran_at(x: JSON) -> float:
    """When a check-in ran (ended), else when it is due."""
    done = x.get("completed_at")
    return float(done) if done is not None and x["status"] != "missed" else float(x["due_at"])


def checkins_table(rows: Sequence[JSON], now: float) -> str:
    cells = [
        (
            x["checkin_id"],
            x["goal_id"],
            "cadence" if x["schedule_id"] is None else f"schedule {x['schedule_id']}",
            local(x["due_at"], None, now),
            relative(_ran_at(x), now),  # when it ran: a fire due in quiet hours runs at their end
            x["status"],
            x["model"] or "-",
            f"{x['tokens_in']}/{x['tokens_out']}" if x["tokens_in"] or x["tokens_out"] else "-",
            urls_shown(_outcome(x)),  # a URL's path and query may carry a token
        )
        for x in rows
    ]
    headers = ("id", "goal", "by", "due", "when", "status", "model", "tokens", "outcome")
    hint = "no check-ins yet; `agentd goal show ID` says when a goal's next look is planned"
    # Narrow terminals keep the outcome readable: the tokens go first, then the due time (`when`
    # says when it ran, or is due), then the model, never cut (`anthrop…` names none): `--json`
    # has all.
    return table(
        headers, cells, {"model": 24, "outcome": 70}, hint,
        floors={"model": 24, "outcome": 24}, drop=("tokens", "due", "model"),
    )  # fmt: skip
