"""A run's page: its facts, then its journal as a timeline a person reads — one entry per thing
that happened (an action's decision, verdict and result together, as `agentd runs show` groups
them), each with its kind, its time, what it did and what came of it; waits say what they wait
for and until when. Written text (reasons, results, observations) is inert (`h`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agentd.models import Goal, Run, Step, StepKind, StepStatus, Verdict
from agentd.text import compact, one_line
from agentd.views.changes import as_text, outputs, result_head, world_diff
from agentd.views.records import describe_wait
from agentd.views.runs import Entry, entries, run_spend
from agentd.views.times import clock, day, relative
from agentd.web.html import badge, h, page, pairs

DIFF_LINES = 6
OUTPUT_LINES = 6


def run_page(run: Run, goal: Goal, steps: Sequence[Step], now: datetime) -> str:
    spend = run_spend(steps)
    facts = [
        ("goal", f'<a href="/goals/{goal.goal_id}">{goal.goal_id}: {h(one_line(goal.title, 80))}</a>'),
        ("trigger", h(run.trigger)),
        ("started", h(relative(run.created_at, now))),
        ("updated", h(relative(run.updated_at, now))),
        ("spend", h(f"{spend['tokens_in']} in + {spend['tokens_out']} out tokens, "
                    f"{spend['usd']:.4f} USD")),
    ]  # fmt: skip
    if not run.status.finished and run.wait:
        facts.insert(1, ("waiting for", h(describe_wait(run.wait, run.next_wake_at, now))))
    if run.summary:
        facts.append(("summary", h(run.summary, multiline=True)))
    head = f'<p class="meta">{badge(run.status, run.status)} agent {h(run.agent)}</p>'
    body = head + pairs(facts) + "<h2>Timeline</h2>" + timeline_html(steps, now)
    return page(f"Run {run.run_id}", body)


def timeline_html(steps: Sequence[Step], now: datetime) -> str:
    if not steps:
        return '<p class="hint">Nothing journaled yet.</p>'
    items: list[str] = []
    heading = None
    for entry in entries(steps):
        this = day(entry.first.created_at, now)
        if this != heading:
            if items:
                items.append("</ol>")
            items.append(f'<h3>{h(this)}</h3><ol class="tl" id="timeline">')
            heading = this
        items.append(_entry(entry))
    return "".join(items) + "</ol>"


def _entry(entry: Entry) -> str:
    kind, head, lines, bad = _describe(entry)
    css = f"k-{kind}" + (" bad" if bad else "")
    sub = "".join(f'<p class="line sub">{h(line)}</p>' for line in lines)
    when = f'<span class="when">{h(clock(entry.first.created_at))} · {h(entry.label)}</span>'
    return (
        f'<li class="{css}"><p class="line"><span class="kind">{h(kind)}</span>'
        f"{h(one_line(head, 300))} {when}</p>{sub}</li>"
    )


def _describe(entry: Entry) -> tuple[str, str, list[str], bool]:
    """(kind, head, lines under it, went wrong) of an entry."""
    s = entry.first
    d = s.data
    if s.action and s.kind in (StepKind.DECIDE, StepKind.CHECK, StepKind.ACT):
        return _action(entry)
    if s.kind == StepKind.OBSERVE:
        if "refused" in d:
            return "observe", f"refused: {as_text(d['refused'])}", [], True
        diff = world_diff(d.get("changes") or {}, DIFF_LINES)
        return "observe", "the world changed" if diff else "looked: no change", diff, False
    if s.kind == StepKind.WAIT:
        return "wait", f"waits for {describe_wait(d)}", [], False
    if s.kind == StepKind.WAKE:
        return "wake", _woke(d), [], False
    if s.kind == StepKind.FINISH:
        status = str(d.get("status", ""))
        return "finish", f"{status}: {as_text(d.get('summary', ''))}", [], status != "succeeded"
    if s.kind == StepKind.DECIDE:
        if "error" in d:
            return "decide", f"invalid reply: {as_text(d['error'])}", [], True
        return "decide", as_text(d.get("reason", "")) or "reply journaled", [], False
    if s.kind == StepKind.START:
        return "start", f"started by {as_text(d.get('trigger', ''))}", [], False
    if s.kind == StepKind.SUMMARIZE:
        return "summary", f"older history folded: {as_text(d.get('summary', ''))}", [], False
    return str(s.kind), compact(d), [], s.status == StepStatus.ERROR


def _woke(d: dict[str, object]) -> str:
    by, why = d.get("woke_by", ""), d.get("why", "")
    if by == "inbox":
        said = f": {as_text(d['answer'])}" if d.get("answer") else ""
        return f"inbox item {d.get('item_id')} {d.get('status', why)}{said}"
    if by == "event":
        return f"event {as_text(d.get('event', why))}"
    return f"{by} ({why})" if by and why else compact(d)


def _action(entry: Entry) -> tuple[str, str, list[str], bool]:
    """An action's decision (why), the harness's verdict and what running it returned."""
    lines: list[str] = []
    first = entry.first
    head = f"{first.action} {compact(first.args or {})}"
    bad = False
    kind = "decide"
    for s in entry.steps:
        if s.kind == StepKind.DECIDE and (reason := s.data.get("reason")):
            lines.append(f"why (the model's words): {as_text(reason)}")
        elif s.kind == StepKind.CHECK:
            bad = bad or s.verdict == Verdict.DENY
            lines.append(f"verdict: {s.verdict} ({as_text(s.data.get('rule', ''))})")
        elif s.kind == StepKind.ACT:
            kind = "act"
            if s.data.get("approval"):
                lines.append(f"approved in inbox item {s.data['approval']}")
            if s.status == StepStatus.STARTED or s.result is None:
                lines.append("result: still running (its result comes when it ends)")
            else:
                bad = bad or s.result.get("ok") is False or bool(s.result.get("error"))
                lines.append(f"result: {result_head(s.result)}")
                lines.extend(outputs(s.result, OUTPUT_LINES))
    return kind, head, lines, bad
