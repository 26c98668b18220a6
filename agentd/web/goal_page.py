"""The goals list and a goal's page: its state and controls (pause or resume, check in now,
snooze, add or remove a schedule — each a form posting to /goals/N/VERB, through the same use
cases as `agentd goal …`), the next check-in and why, its open items, its runs, its memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentd.models import Goal, GoalStatus, InboxItem, Run
from agentd.text import one_line
from agentd.views import outer as render_outer
from agentd.views.times import relative
from agentd.web.html import badge, h, page, pairs, post_form

SNOOZES = (("1h", 3600), ("4h", 4 * 3600), ("1 day", 86400), ("3 days", 3 * 86400))


def goals_page(goals: Sequence[Goal], now: datetime) -> str:
    if not goals:
        body = (
            '<div class="empty" id="empty"><p><strong>No goals yet.</strong></p><p>A goal is '
            'what agentd pursues or watches for you: add one with <code>agentd goal add "Keep '
            'checkout up" --why "…"</code> (<code>agentd goal add --help</code> shows how).</p>'
            "</div>"
        )
        return page("Goals", body)
    cards = "".join(
        f'<li id="goal-{g.goal_id}"><div class="body"><a class="t" href="/goals/{g.goal_id}">'
        f'{g.goal_id}: {h(one_line(g.title, 120))}</a><p class="meta">{badge(g.status, g.status)}'
        f" · agent {h(g.agent)} · added {h(relative(g.created_at, now))}</p></div></li>"
        for g in goals
    )
    return page("Goals", f'<ul class="cards">{cards}</ul>')


def goal_page(
    goal: Goal,
    runs: Sequence[Run],
    outlook: Any,
    open_items: Sequence[InboxItem],
    now: datetime,
    *,
    flash: str = "",
    error: str = "",
) -> str:
    n = goal.goal_id
    meta = [badge(goal.status, goal.status), f"agent {h(goal.agent)}"]
    if goal.deadline:
        meta.append(f"deadline {h(relative(goal.deadline, now))}")
    if open_items:
        meta.append(f'<a href="/?goal={n}">{len(open_items)} open in the inbox</a>')
    parts = [
        f'<p class="meta">{" · ".join(meta)}</p>',
        _controls(goal, outlook),
        '<section id="next"><h2>Next check-in</h2>',
        _failing(outlook),
        f'<p class="line">{h(render_outer.next_line(outlook), multiline=True)}</p>'.replace(
            "\n", "<br>"
        ),
        _snoozed(n, outlook),
        "</section>",
        _schedules(n, outlook),
        _runs(runs, now),
        _about(goal, outlook),
    ]
    return page(f"Goal {n}: {one_line(goal.title, 80)}", "".join(parts), flash=flash, error=error)


def _controls(goal: Goal, outlook: Any) -> str:
    n = goal.goal_id
    closed = goal.status in (GoalStatus.ACHIEVED, GoalStatus.ABANDONED)
    if closed:
        return '<p class="hint">This goal is closed; it takes no more runs or check-ins.</p>'
    if goal.status == GoalStatus.PAUSED:
        move = post_form(f"/goals/{n}/resume", "", "Resume", form_id="resume-form", css="go")
    else:
        move = post_form(f"/goals/{n}/pause", "", "Pause", form_id="pause-form", css="stop")
    checkin = ""
    if goal.status == GoalStatus.ACTIVE and outlook.get("enabled"):
        checkin = post_form(f"/goals/{n}/checkin", "", "Check in now", form_id="checkin-form")
    options = "".join(f'<option value="{s}">{h(t)}</option>' for t, s in SNOOZES)
    snooze = post_form(
        f"/goals/{n}/snooze",
        f'<select name="seconds" aria-label="snooze for">{options}</select>',
        "Snooze",
        form_id="snooze-form",
    )
    return f'<div class="controls" id="goal-controls">{move}{checkin}{snooze}</div>'


def _failing(outlook: Any) -> str:
    """The goal's check-ins failing in a row, as `goal show` says it (agentd.operator.failures)."""
    failing = outlook.get("failing")
    if not failing:
        return ""
    tz = (outlook.get("cadence") or {}).get("tz", "UTC")
    text = render_outer.failing_line(failing, outlook["now"], tz)
    return f'<p class="error" id="failing">Failing: {h(text, multiline=True)}</p>'.replace(
        "\n", "<br>"
    )


def _snoozed(goal_id: int, outlook: Any) -> str:
    until = outlook.get("snoozed_until")
    if not until or until <= outlook["now"]:
        return ""
    when = render_outer.local(until, (outlook.get("cadence") or {}).get("tz"), outlook["now"])
    end = post_form(
        f"/goals/{goal_id}/snooze",
        '<input type="hidden" name="seconds" value="0">',
        "End the snooze",
        form_id="unsnooze-form",
    )
    return f'<p class="meta">Snoozed until {h(when)}.</p>{end}'


def _schedules(goal_id: int, outlook: Any) -> str:
    rows = []
    for s in outlook.get("schedules", []):
        when = (
            s["spec"] if s["kind"] == "cron" else f"every {render_outer.duration(float(s['spec']))}"
        )
        nxt = s.get("error") or render_outer.relative(
            s.get("runs_at") or s["next_fire_at"], outlook["now"]
        )
        remove = post_form(
            f"/goals/{goal_id}/unschedule",
            f'<input type="hidden" name="schedule_id" value="{s["schedule_id"]}">',
            "Remove",
        )
        rows.append(
            f'<li><div class="body"><code>{h(when)}</code> {h(s["tz"])}'
            f'<p class="meta">next {h(nxt)}</p></div>{remove}</li>'
        )
    listed = f'<ul class="cards">{"".join(rows)}</ul>' if rows else ""
    add = (
        f'<form method="post" action="/goals/{goal_id}/schedule" id="schedule-form" class="filters">'
        '<label>When: 1d, 30m or a cron line<input type="text" name="spec" '
        'placeholder="0 9 * * mon-fri" required></label>'
        '<label>Zone (optional)<input type="text" name="tz" placeholder="Europe/Berlin"></label>'
        "<button>Add schedule</button></form>"
    )
    hint = "" if rows else '<p class="hint">None: the cadence alone decides when it looks.</p>'
    return f'<section id="schedules"><h2>Schedules</h2>{hint}{listed}{add}</section>'


def _runs(runs: Sequence[Run], now: datetime) -> str:
    if not runs:
        return '<section id="runs"><h2>Runs</h2><p class="hint">No runs yet.</p></section>'
    cards = "".join(
        f'<li><div class="body"><a class="t" href="/runs/{r.run_id}">Run {r.run_id}</a> '
        f'{badge(r.status, r.status)}<p class="meta">{h(r.trigger)} · '
        f"{h(relative(r.created_at, now))}"
        + (f" · {h(one_line(r.summary, 120))}" if r.summary else "")
        + "</p></div></li>"
        for r in runs
    )
    return f'<section id="runs"><h2>Runs</h2><ul class="cards">{cards}</ul></section>'


def _about(goal: Goal, outlook: Any) -> str:
    facts = [
        ("why", h(goal.why or "-", multiline=True)),
        ("criteria", h("; ".join(goal.criteria) or "-")),
    ]
    memory = outlook.get("memory") or []
    mem = "".join(
        f"<li>{h(e.get('kind', ''))}: {h(one_line(str(e.get('text', '')), 200))}</li>"
        for e in memory
    )
    cadence = "<pre>" + h(render_outer.outlook_view(outlook), multiline=True) + "</pre>"
    return (
        f'<section id="about"><h2>About this goal</h2>{pairs(facts)}'
        f'<details><summary>Memory ({len(memory)})</summary><ul class="ev">{mem}</ul></details>'
        f"<details><summary>Cadence and check-ins in full</summary>{cadence}</details></section>"
    )
