"""A run as the operator reads it: its header, its timeline, one step in full, live narration.

The timeline fits a width: one entry per thing that happened, each line cut with …; an action is
one entry (what was decided and why, the harness's verdict, what executing it returned), and world
changes are diffs (`- old line`, `+ new line`, `code: 200 → 500`). `runs show --step N` and
--json carry every value in full. Written text (reasons, results, observations) passes `safe()`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from agentd.models import JSON, Goal, Run, Step, StepKind, StepStatus, Verdict
from agentd.text import canonical, compact, jsonable, one_line, safe, single_line
from agentd.views.changes import (
    DIFF_LINES,
    OUTPUT_LINES,
    as_text,
    outputs,
    result_head,
    world_diff,
)
from agentd.views.records import describe_wait
from agentd.views.tables import field_lines
from agentd.views.times import clock, day, span, stamp

MIN_WIDTH = 40


# ── --json ───────────────────────────────────────────────────────────────────────────────────


def run_spend(steps: Sequence[Step]) -> JSON:
    """Tokens and cost of a run's model calls, from its journal."""
    costs = [s.data.get("cost_usd") for s in steps]
    return {
        "tokens_in": sum(s.tokens_in for s in steps),
        "tokens_out": sum(s.tokens_out for s in steps),
        "usd": round(sum(c for c in costs if isinstance(c, int | float)), 6),
    }


def show_json(run: Run, goal: Goal, steps: Sequence[Step]) -> JSON:
    """`runs show --json`: the run, its goal, its spend and every step in full."""
    return {**jsonable(run), "goal": goal, "spend": run_spend(steps), "steps": steps}


# ── the header ───────────────────────────────────────────────────────────────────────────────


def run_header(
    run: Run, goal: Goal, now: datetime, steps: Sequence[Step] = (), width: int = 100
) -> str:
    """The run's facts in `width` columns: its summary wrapped (never cut), the rest cut."""
    spend = run_spend(steps)
    room = max(width, MIN_WIDTH) - len("waiting for: ")
    summary = textwrap.wrap(single_line(run.summary or "-"), room)
    pairs: list[tuple[str, object]] = [
        ("run", f"{run.run_id}  [{run.status}]  agent {safe(run.agent)}"),
        ("goal", f"{goal.goal_id}: {goal.title}"),
        ("trigger", run.trigger),
        ("started", stamp(run.created_at, now)),
        ("updated", stamp(run.updated_at, now)),
        ("waiting for", describe_wait(run.wait, run.next_wake_at, now)),
        ("spend", f"{spend['tokens_in']} in + {spend['tokens_out']} out tokens, "
                  f"{spend['usd']:.4f} USD"),
    ]  # fmt: skip
    return field_lines(
        [(k, one_line(v, room)) for k, v in pairs] + [("summary", "\n".join(summary))]
    )


# ── the timeline ─────────────────────────────────────────────────────────────────────────────


@dataclass
class Entry:
    """One thing that happened: a step, or an action's decide → check → act steps together."""

    steps: list[Step]

    @property
    def first(self) -> Step:
        return self.steps[0]

    @property
    def label(self) -> str:
        a, b = self.steps[0].seq, self.steps[-1].seq
        return f"#{a}" if a == b else f"#{a}-{b}"

    @property
    def settled(self) -> bool:
        """False while more of the same action may still be journaled (for --follow)."""
        last = self.steps[-1]
        if last.kind == StepKind.ACT:
            return last.status != StepStatus.STARTED
        if last.kind == StepKind.CHECK:
            return last.verdict != Verdict.ALLOW
        if last.kind == StepKind.DECIDE:  # a check follows an action; a raw reply is parsed
            return last.status != StepStatus.STARTED and not last.action
        return True


def _same_action(a: Step, b: Step) -> bool:
    return a.action == b.action and (a.digest == b.digest or a.args == b.args)


def entries(steps: Sequence[Step]) -> list[Entry]:
    """Group an action's decide, check and act (consecutive, same action and arguments)."""
    out: list[Entry] = []
    for step in steps:
        last = out[-1].steps[-1] if out else None
        joins = (
            last is not None
            and step.action
            and _same_action(last, step)
            and (
                (last.kind == StepKind.DECIDE and step.kind == StepKind.CHECK)
                or (
                    last.kind == StepKind.CHECK
                    and last.verdict == Verdict.ALLOW
                    and step.kind == StepKind.ACT
                )
            )
        )
        if joins:
            out[-1].steps.append(step)
        else:
            out.append(Entry([step]))
    return out


def _tokens(step: Step) -> str:
    return (
        f" ({step.tokens_in}/{step.tokens_out} tokens)" if step.tokens_in or step.tokens_out else ""
    )


def _wake_text(d: JSON) -> str:
    by, why = d.get("woke_by", ""), d.get("why", "")
    if by == "inbox":
        text = f"inbox item {d.get('item_id')} {d.get('status', why)}"
        if d.get("answer"):
            text += f": {as_text(d['answer'])}"
        return text
    if by == "event":
        return f"event {as_text(d.get('event', why))}"
    return f"{by} ({why})" if by and why else compact(d)


def _action_body(entry: Entry, diff_lines: int | None) -> tuple[str, str, list[str]]:
    """(kind column, head, further lines) of an action entry."""
    lines: list[str] = []
    head = ""
    for s in entry.steps:
        if s.kind == StepKind.DECIDE:
            head = f"{s.action} {compact(s.args or {})}"
            if reason := s.data.get("reason"):
                lines.append(f"why: {as_text(reason)}{_tokens(s)}")
        elif s.kind == StepKind.CHECK:
            head = head or f"{s.action} {compact(s.args or {})}"
            where = " at execution" if s.data.get("at") == "execution" else ""
            lines.append(f"verdict: {s.verdict}{where} ({as_text(s.data.get('rule', ''))})")
        elif s.kind == StepKind.ACT:
            head = head or f"{s.action} {compact(s.args or {})}"
            if s.data.get("approval"):
                lines.append(f"approved: inbox item {s.data['approval']}")
            if s.status == StepStatus.STARTED or s.result is None:
                lines.append("result: still running (its result comes when it ends)")
            else:
                lines.append(f"result: {result_head(s.result)}")
                lines.extend(outputs(s.result, diff_lines and OUTPUT_LINES))
    return str(entry.steps[-1].kind), head, lines


def _body(entry: Entry, diff_lines: int | None) -> tuple[str, str, list[str]]:
    """(kind column, head, further lines) of an entry; None diff_lines: everything."""
    s = entry.first
    d = s.data
    if s.action and s.kind in (StepKind.DECIDE, StepKind.CHECK, StepKind.ACT):
        return _action_body(entry, diff_lines)
    if s.kind == StepKind.OBSERVE:
        if "refused" in d:
            return "observe", f"refused: {as_text(d['refused'])}", []
        diff = world_diff(d.get("changes") or {}, diff_lines)
        return ("observe", "changed:", diff) if diff else ("observe", "no change", [])
    texts: dict[StepKind, str] = {
        StepKind.START: f"trigger {as_text(d.get('trigger', ''))}",
        StepKind.DECIDE: (
            f"invalid reply: {as_text(d['error'])}" if "error" in d
            else "reply journaled, not yet parsed" if s.status == StepStatus.STARTED
            else as_text(d.get("reason", ""))
        ),
        StepKind.WAIT: describe_wait(d),
        StepKind.WAKE: _wake_text(d),
        StepKind.SUMMARIZE: f"older history folded: {as_text(d.get('summary', ''))}",
        StepKind.FINISH: f"{d.get('status', '')}: {as_text(d.get('summary', ''))}",
    }  # fmt: skip
    if s.kind in (StepKind.PLAN, StepKind.GENERATE, StepKind.JUDGE):
        return str(s.kind), _build_text(s) + _tokens(s), []
    return str(s.kind), texts.get(s.kind, compact(d)) + _tokens(s), []


def _build_text(s: Step) -> str:
    """A build run's plan, draft or verdict in a line (`agentd artifact show` has the rest)."""
    d = s.data
    if s.status == StepStatus.ERROR:
        return f"invalid reply: {as_text(d.get('error', ''))}"
    if s.kind == StepKind.PLAN:
        reqs = d.get("requirements") or []
        sources = ", ".join(sorted({str(r.get("source")) for r in reqs}))
        asked = f"; asks: {as_text(d['question'])}" if d.get("question") else ""
        return f"{len(reqs)} requirements ({sources}){asked}"
    if s.kind == StepKind.GENERATE:
        what = "revision" if d.get("revision") else "first draft"
        return f"v{d.get('version')} ({what}, {d.get('chars')} chars)"
    v = d.get("verdict") or {}
    head = "passed" if v.get("passed") else "fails " + ", ".join(map(str, v.get("failing", [])))
    return f"v{d.get('version')} {head}: {as_text(v.get('summary', ''))}"


def entry_lines(entry: Entry, width: int, seq_w: int) -> list[str]:
    """An entry as lines at most `width` wide: `#3-5  18:00:05  act      restart {}` and the
    lines under it, indented under the head."""
    kind, head, rest = _body(entry, DIFF_LINES)
    prefix = f"{entry.label:<{seq_w}}  {clock(entry.first.created_at)}  {kind:<8} "
    indent = " " * len(prefix)
    room = max(width - len(prefix), 12)
    lines = [(prefix + one_line(head, room)).rstrip()]
    for line in rest:  # a diff's or an output's own indentation is kept
        lead = len(line) - len(line.lstrip(" "))
        lines.append(indent + " " * lead + one_line(line, max(room - lead, 12)))
    return lines


def entries_lines(
    shown: Sequence[Entry], now: datetime, width: int, seq_w: int, heading: str | None = None
) -> tuple[list[str], str | None]:
    """Entries as lines, with a day heading (it names the zone) whenever the local day changes
    from `heading`, the one above them; returns the lines and the last heading."""
    out: list[str] = []
    for entry in shown:
        this = day(entry.first.created_at, now)
        if this != heading:
            out.append(this)
            heading = this
        out.extend(entry_lines(entry, max(width, MIN_WIDTH), seq_w))
    return out, heading


def timeline(steps: Sequence[Step], now: datetime, width: int = 100) -> str:
    """The whole timeline; when a line had to be cut, a last line says where to read it all."""
    shown = entries(steps)
    seq_w = max((len(e.label) for e in shown), default=2)
    lines = entries_lines(shown, now, width, seq_w)[0]
    if any(line.endswith("…") for line in lines) and steps:
        run = steps[0].run_id
        lines.append(
            one_line(f"(cut to fit: `agentd runs show {run} --step N` shows step N in full)", width)
        )
    return "\n".join(lines)


# ── one step in full (`runs show RUN --step N`) ──────────────────────────────────────────────


def step_view(step: Step, now: datetime) -> str:
    """One step with every value in full: written text marked `│`, arguments and data as JSON."""
    pairs: list[tuple[str, object]] = [
        ("step", f"#{step.seq}  {step.kind}  [{step.status}]"),
        ("at", stamp(step.created_at, now, seconds=True)),
    ]
    if step.completed_at and step.completed_at != step.created_at:
        took = (step.completed_at - step.created_at).total_seconds()
        pairs.append(("took", f"{took:.3f}s" if took < 60 else span(took)))
    if step.action:
        pairs += [("action", safe(step.action)), ("arguments", canonical(step.args or {}))]
    if step.verdict:
        pairs.append(("verdict", f"{step.verdict} ({safe(step.data.get('rule', ''))})"))
    if step.tokens_in or step.tokens_out:
        pairs.append(("tokens", f"{step.tokens_in} in, {step.tokens_out} out"))
    if isinstance(reason := step.data.get("reason"), str):
        pairs.append(("why", safe(reason, multiline=True)))
    if changes := step.data.get("changes"):
        pairs.append(("changes", "\n".join(world_diff(changes))))
    if step.result is not None:
        pairs.append(("result", result_head(step.result)))
        for stream in ("stdout", "stderr"):
            if isinstance(text := step.result.get(stream), str) and text.strip():
                pairs.append((stream, safe(text.rstrip("\n"), multiline=True)))
        pairs.append(("result json", canonical(step.result)))
    pairs.append(("data", canonical(step.data)))
    return field_lines(pairs)


# ── live narration (`agentd demo`) ───────────────────────────────────────────────────────────


def step_line(step: Step) -> str:
    """One step as one line (for live narration): seq, kind, action, verdict, what happened."""
    parts = [f"#{step.seq:<3}", f"{step.kind:<7}"]
    if step.action:
        parts.append(one_line(f"{step.action} {compact(step.args or {})}", 60))
    if step.verdict:
        parts.append(f"→ {step.verdict} ({single_line(step.data.get('rule', ''))})")
    if detail := step_detail(step):
        parts.append(f"— {one_line(detail, 100)}")
    return " ".join(parts)


def step_detail(step: Step) -> str:
    """What happened in a step, in one neutralised line: its result, reason, wait or outcome."""
    if step.kind == StepKind.ACT:
        if step.result is None:
            return "still running (its result comes when it ends)"
        return single_line(result_head(step.result))
    if step.kind == StepKind.CHECK:
        return ""  # its verdict and rule are on the line already
    if step.kind == StepKind.DECIDE and step.action:
        return single_line(step.data.get("reason", ""))
    _kind, head, rest = _body(Entry([step]), 2)
    return single_line(" ".join([head, *rest]))
