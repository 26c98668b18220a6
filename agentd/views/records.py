"""The CLI's views of records: goals, runs, status, inbox items, events, doctor's checks, usage.

Pure functions between domain records and text; nothing here reads the database or the environment.
Tables keep one line per row (long cells are cut with …); times follow `views.times`, a run's
timeline is `views.runs`. Text from a model, the world or a person passes through `safe()`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from agentd.models import JSON, Event, Goal, InboxItem, InboxKind, Run
from agentd.text import CONTINUATION, canonical, compact, safe, single_line
from agentd.views import evidence as ev
from agentd.views import outer
from agentd.views.held import held_summary, late_summary
from agentd.views.inbox_status import shown_status
from agentd.views.nudges import dismissed_text
from agentd.views.tables import field_lines, table, terminal_width
from agentd.views.times import local, relative, stamp

# ── goals ────────────────────────────────────────────────────────────────────────────────────


def goals_table(goals: Sequence[Goal], now: datetime) -> str:
    rows = [(g.goal_id, g.status, g.agent, relative(g.deadline, now), g.title) for g in goals]
    hint = "no goals; add one with `agentd goal add TITLE --why TEXT`"
    return table(("id", "status", "agent", "deadline", "title"), rows, {"title": 60}, hint)


def goal_view(goal: Goal, runs: Sequence[Run], tokens: JSON, now: datetime) -> str:
    criteria = "\n".join(f"- {safe(c)}" for c in goal.criteria) or "-"
    deadline = stamp(goal.deadline, now)
    if goal.deadline and goal.deadline <= now and goal.status in ("active", "paused"):
        deadline += "  passed"
    head = field_lines(
        [
            ("goal", f"{goal.goal_id}  [{goal.status}]  agent {safe(goal.agent)}"),
            ("title", safe(goal.title)),
            ("why", safe(goal.why, multiline=True)),
            ("criteria", criteria),
            ("deadline", deadline),
            ("created", stamp(goal.created_at, now)),
            (
                "spend",
                f"{tokens['tokens']} tokens ({tokens['tokens_in']} in, {tokens['tokens_out']} out)",
            ),
        ],
        terminal_width(),
    )
    hint = f"no runs yet; start one with `agentd runs start {goal.goal_id}`"
    return f"{head}\n\nruns:\n{runs_table(runs, now) if runs else hint}"


# ── runs ─────────────────────────────────────────────────────────────────────────────────────


def describe_wait(
    wait: JSON | None, wake_at: datetime | None = None, now: datetime | None = None
) -> str:
    """What a waiting run waits for, in words (one line, neutralised)."""
    if not wait:
        return "-"
    kind, why = wait.get("kind"), wait.get("why", "")
    if kind == "inbox":
        text = f"inbox item {wait.get('item_id')} ({why})"
    elif kind == "event":
        text = f"event {wait.get('event')!r}"
    elif why == "model_retry":
        text = f"retry after model error: {wait.get('error', '')}"
    else:
        text = f"timer ({why})"
    if wake_at is None:
        return single_line(text)
    return single_line(f"{text} until {stamp(wake_at, now) if now else local(wake_at, wake_at)}")


def runs_table(runs: Sequence[Run], now: datetime) -> str:
    rows = [
        (
            r.run_id,
            r.goal_id,
            r.status,
            r.trigger,
            r.step_count,
            describe_wait(r.wait) if r.wait else "-",
            relative(r.updated_at, now),
            r.summary or "",
        )
        for r in runs
    ]
    headers = ("id", "goal", "status", "trigger", "steps", "waiting for", "updated", "summary")
    hint = "no runs; start one with `agentd runs start GOAL_ID`"
    # Narrow terminals: the summary (what happened) keeps a readable width; the step count goes
    # first, then the trigger, which is never cut (`state:health.u…` says nothing) — both are in
    # `agentd runs show`.
    return table(
        headers, rows, {"waiting for": 36, "summary": 50}, hint,
        floors={"waiting for": 14, "summary": 24}, drop=("steps", "trigger"),
    )  # fmt: skip


# ── status ───────────────────────────────────────────────────────────────────────────────────


def status_view(data: JSON, now: datetime) -> str:
    """`agentd status`: the daemon, runs by state, the inbox, the next check-ins."""
    pid = data["daemon"]["pid"]
    if data["daemon"]["up"]:
        daemon = f"up (pid {pid})" if pid else "up"
    else:
        daemon = "down; start it with `agentd serve` (runs and check-ins wait until it runs)"
    runs = " · ".join(f"{n} {s}" for s, n in data["runs"].items())
    inbox = data["inbox"]
    kinds = ", ".join(f"{inbox[str(k)]} {k}" for k in InboxKind if inbox[str(k)])
    if inbox["open"]:
        waiting = f"{inbox['open']} open ({kinds}), oldest {relative(inbox['oldest'], now)}"
        waiting += "; see `agentd inbox list`"
    else:
        waiting = "nothing open"
    fields = [("home", safe(data["home"])), ("daemon", daemon), ("runs", runs),
              ("inbox", waiting)]  # fmt: skip
    if (web := data.get("web")) is not None:
        if web["port"] is not None:
            served = f"http://127.0.0.1:{web['port']} (`agentd web` prints the login URL)"
        else:
            failed = safe(str(web["port_failed"]))
            served = f"not served: could not listen on 127.0.0.1:{failed}; see `agentd doctor`"
        fields.append(("web inbox", served))
    if data.get("notify"):
        # Held until the daemon's time (a scaled test clock's too), as the check-ins below.
        fields.append(("notify", _notify_line(data["notify"], data.get("now") or now)))
    head = field_lines(fields, terminal_width())
    parts = [head]
    if data["active_runs"]:
        parts.append("active runs:\n" + runs_table(data["active_runs"], now))
    if data.get("failing_checkins"):
        parts.append(f"failing check-ins:\n{failing_text(data)}")
    if data.get("dismissed_nudges"):  # agentd/operator/nudges.py
        parts.append(f"nudges mostly dismissed:\n{dismissed_text(data['dismissed_nudges'])}")
    parts.append(f"next check-ins:\n{next_checkins_text(data)}")
    return "\n\n".join(parts)


def failing_text(data: JSON) -> str:
    """Goals whose check-ins are failing: how many in a row, since when, the last error in one
    line (agentd.operator.failures), and what to do."""
    now = data["now"]
    rows = [
        (x["goal_id"], x["in_a_row"],
         f"{local(x['since'], now)} ({relative(x['since'], now)})" if x["since"] else "-",
         x["last_error"], x["title"])
        for x in data["failing_checkins"]
    ]  # fmt: skip
    headers = ("goal", "in a row", "since", "last error", "title")
    # The last error is what to read; at narrow widths the title goes (the goal id names it).
    lines = [table(headers, rows, {"last error": 60, "title": 30}, floors={"last error": 30},
                   drop=("title",))]  # fmt: skip
    if (more := data["failing_goals"] - len(rows)) > 0:
        lines.append(f"… and {more} more goal{'s' if more > 1 else ''}")
    hint = (
        "see `agentd goal show ID` and `agentd checkins --goal ID` for each error; "
        "`agentd doctor --ping` asks each model for a tiny reply"
    )
    lines += textwrap.wrap(hint, terminal_width() or len(hint), break_on_hyphens=False)
    return "\n".join(lines)


def next_checkins_text(data: JSON) -> str:
    """The soonest check-ins, each at its time in the goal's zone and, below it, the planner's
    reason in full: the words of `goal show`'s next check-in (agentd.outer.planner)."""
    home_now = data["now"].timestamp()
    looks = data["next_checkins"]
    rows = [
        (x["goal_id"], outer.local(x["at"].timestamp(), x.get("tz"), home_now),
         outer.relative(x["at"].timestamp(), home_now), x["title"])
        for x in looks
    ]  # fmt: skip
    hint = data.get("next_checkins_error") or (
        "none planned (no active goal, or the daemon has not planned one yet)"
    )
    head, *lines = table(("goal", "at", "in", "title"), rows, {"title": 40}, hint).split("\n")
    if not looks:
        return head
    pad = " " * head.index("AT")  # the reason starts under the time
    room = max((terminal_width() or 0) - len(pad) - len("why: "), 20)
    out = [head]
    for line, x in zip(lines, looks, strict=True):
        # Wrapped under itself, never cut, as `goal show` wraps the same reason.
        why = textwrap.wrap(safe(x["why"]), room) if terminal_width() else [safe(x["why"])]
        out += [line, f"{pad}why: {why[0] if why else ''}"]
        out += [f"{pad}     {part}" for part in why[1:]]
    return "\n".join(out)


def _notify_line(health: JSON, now: datetime) -> str:
    """`ops ok · pager failing (3 waiting: HTTP 503) · 2 held by quiet hours until 08:00 CET
    (nudge 9, notice 12)`: each channel the outbox has used, then what quiet hours hold back and
    which pages will arrive after their item expires (agentd.views.held)."""
    parts = []
    for name, h in health.items():
        waiting = h["pending"] - int(h.get("held") or 0)  # held ones are said once, below
        if h["failing"]:
            parts.append(f"{safe(name)} failing ({waiting} waiting: {safe(str(h['error']))[:80]})")
        else:
            parts.append(f"{safe(name)} ok" + (f" ({waiting} waiting)" if waiting > 0 else ""))
    parts += [s for s in (held_summary(health, now), late_summary(health, now)) if s]
    return " · ".join(parts) + (
        "; see `agentd doctor`" if any(h["failing"] for h in health.values()) else ""
    )


# ── inbox and events ─────────────────────────────────────────────────────────────────────────

WRITTEN = "written by the model or taken from the world; agentd has not checked it:"
# Items agentd posts in its own words: said so, not the above (an error they quote may still
# carry what a model or a source said).
OWN_RULES = frozenset({"checkin_failed", "internal_error"})
WRITTEN_BY_AGENTD = "written by agentd (an error it quotes may hold a model's or a source's words):"
RULE = "─" * 72
AUTHORITATIVE = "AUTHORITATIVE —"  # starts the heading of the block the model cannot write


def items_table(items: Sequence[InboxItem], now: datetime, *, with_status: bool) -> str:
    headers: tuple[str, ...] = ("id", "kind", "goal", "run", "title", "created", "expires")
    rows: list[tuple[object, ...]] = [
        (
            i.item_id,
            i.kind,
            i.goal_id or "-",
            i.run_id or "-",
            i.title,
            relative(i.created_at, now),
            # A consumed, denied or withdrawn item no longer expires.
            relative(i.expires_at, now) if i.status == "open" else "-",
        )
        for i in items
    ]
    if with_status:
        headers += ("status",)
        rows = [(*row, shown_status(i)) for row, i in zip(rows, items, strict=True)]
    hint = "no inbox items" if with_status else "nothing open in the inbox"
    return table(headers, rows, {"title": 50}, hint)


def item_view(
    item: InboxItem,
    goal: Goal | None,
    now: datetime,
    evidence: JSON | None = None,
    *,
    world: bool = False,
    width: int | None = None,
) -> str:
    """An item in full: its facts; agentd's evidence summary (`views.evidence`); the text a model
    or the world wrote, every line marked, without the raw world it quotes (`world` shows it,
    after the text); then, for an approval and after a rule, the action and arguments that will
    execute. With a `width`, lines fit it: written text wraps, evidence is cut (the raw world is
    one flag away), the authoritative block breaks long lines with ↵ and loses nothing."""
    pairs: list[tuple[str, object]] = [
        ("item", f"{item.item_id}  {item.kind}  [{shown_status(item)}]"),
        ("title", safe(item.title)),
        ("goal", f"{goal.goal_id}: {safe(goal.title)}" if goal else "-"),
        ("run", f"{item.run_id} (agentd runs show {item.run_id})" if item.run_id else "-"),
        ("created", stamp(item.created_at, now)),
        ("expires", stamp(item.expires_at, now) if item.status == "open" else "-"),
    ]
    if item.rule:
        pairs.append(("rule", safe(item.rule)))
    pairs.append(("answer", safe(item.answer or "-", multiline=True)))
    if item.resolved_at:
        pairs.append(("closed", stamp(item.resolved_at, now)))
    body, quoted = ev.split_world(item.body)
    parts = [field_lines(pairs, width)]
    if evidence and (shown := ev.lines(evidence, now, None if width is None else width - 2)):
        parts.append(EVIDENCE + "\n" + "\n".join("  " + line for line in shown))
    heading = WRITTEN_BY_AGENTD if item.rule in OWN_RULES else WRITTEN
    parts.append(f"{heading}\n{_written(item, body, width)}")
    raw = ev.raw_world(item.data.get("world"), quoted)
    if world:
        parts.append(f"the world at the time, raw (as the sources returned it):\n{raw or '-'}")
    elif raw:
        parts.append(f"the raw world: agentd inbox show {item.item_id} --world")
    if item.kind == InboxKind.APPROVAL:
        parts.append(_authoritative(item, width))
    if moves := _next_moves(item):
        parts.append(moves)
    return "\n\n".join(parts)


EVIDENCE = "evidence (agentd's summary of what its sources saw; `!` marks an error line):"


def _written(item: InboxItem, body: str, width: int | None = None) -> str:
    """The item's body (and the model's reason when the body lacks it), each line marked `│`
    and, with a `width`, wrapped to fit it."""
    texts = [body] if body.strip() else []
    reason = item.data.get("reason")
    if isinstance(reason, str) and reason.strip() and reason not in body:
        texts.append(f"reason: {reason}")
    marked = (CONTINUATION + safe("\n".join(texts) or "-", multiline=True)).split("\n")
    if width is not None:
        room = max(width - len(CONTINUATION), 20)
        marked = [
            CONTINUATION + part
            for line in marked
            for part in (textwrap.wrap(line.removeprefix(CONTINUATION), room) or [""])
        ]
    return "\n".join(marked)


def _authoritative(item: InboxItem, width: int | None = None) -> str:
    """The exact action the approval is bound to, last on the screen: canonical, escaped JSON."""
    pairs: list[tuple[str, object]] = [
        ("action", safe(item.action or "-")),
        ("arguments", canonical(item.args or {})),
    ]
    if (resolved := item.data.get("resolved")) is not None:
        pairs.append(("resolves to", canonical(resolved)))
    pairs.append(("digest", safe((item.digest or "-")[:12])))
    room = None if width is None else max(width - 2 - max(len(k) for k, _ in pairs) - 3, 20)
    pairs = [(k, _broken(str(v), room)) for k, v in pairs]
    fields = "\n".join("  " + line for line in field_lines(pairs).split("\n"))
    what = "will execute if approved" if item.status == "open" else "this approval was bound to"
    return f"{RULE}\n{AUTHORITATIVE} what {what} (from agentd, not the model):\n{fields}\n{RULE}"


def _broken(text: str, room: int | None) -> str:
    """Each line longer than `room` broken into pieces ending in ↵ — a character canonical JSON
    never holds (it escapes all but ASCII), so no break can pass for the value's own."""
    if room is None:
        return text
    out = []
    for line in text.split("\n"):
        while len(line) > room:
            out.append(line[: room - 1] + "↵")
            line = line[room - 1 :]
        out.append(line)
    return "\n".join(out)


def _next_moves(item: InboxItem) -> str:
    if item.status != "open":
        return ""
    n = item.item_id
    if item.rule == "nudge":  # a check-in's suggestion: one command carries it out
        return f'next: agentd inbox accept {n}  |  agentd inbox dismiss {n} --reason "..."'
    moves = {
        InboxKind.QUESTION: f'agentd inbox answer {n} "..."',
        InboxKind.APPROVAL: f'agentd inbox approve {n}  |  agentd inbox deny {n} --reason "..."',
        InboxKind.NOTICE: f"agentd inbox dismiss {n}",
    }
    return f"next: {moves[item.kind]}"


def events_table(events: Sequence[Event], now: datetime) -> str:
    rows = [
        (
            e.event_id,
            e.name,
            e.source,
            e.dedupe_key or "-",
            relative(e.created_at, now),
            compact(e.data),
        )
        for e in events
    ]
    hint = "no events; send one with `agentd event send NAME`"
    widths = {"from": 20, "key": 24, "data": 60}
    return table(("id", "name", "from", "key", "created", "data"), rows, widths, hint)


# ── doctor ───────────────────────────────────────────────────────────────────────────────────


class Check(NamedTuple):
    """One `agentd doctor` finding; a failed check that is not `required` is information, or a
    `warning` when it means something will happen (a watched source down starts a run)."""

    name: str
    ok: bool
    message: str
    required: bool = True
    warning: bool = False


def checks_text(checks: Sequence[Check]) -> str:
    lines = []
    for check in checks:
        mark = (
            "ok" if check.ok else "FAIL" if check.required else "warn" if check.warning else "info"
        )
        first, *rest = [safe(line) for line in check.message.splitlines()] or [""]
        lines.append(f"{mark:<5} {safe(check.name):<14} {first}")
        lines.extend(f"{'':<20} {line}" for line in rest)
    return "\n".join(lines)


def _cached(r: JSON) -> str:
    """Cached prompt tokens and their share of the prompt tokens (a prefix cache at work)."""
    n, of = int(r["tokens_cached"]), int(r["tokens_in"])
    return f"{n} ({100 * n / of:.0f}%)" if n and of else str(n)


def usage_table(rows: Sequence[JSON]) -> str:
    headers = ("day", "goal", "model", "calls", "tokens in", "tokens out", "cached", "usd")
    cells = [
        (r["day"], r["goal_id"], r["model"], r["calls"], r["tokens_in"], r["tokens_out"],
         _cached(r), f"{r['usd']:.4f}")
        for r in rows
    ]  # fmt: skip
    total = sum(float(r["usd"]) for r in rows)
    body = table(headers, cells, {"model": 40}, empty="no model calls in that period")
    return f"{body}\n\ntotal: {total:.4f} USD" if rows else body
