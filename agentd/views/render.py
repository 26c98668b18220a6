"""The CLI's text, out and in: neutralising, tables, detail views, --json; typed-in JSON.

Pure functions between domain records and text; nothing here reads the database or the environment.
Tables keep one line per row (long cells are cut with …); --json always carries the full values,
with datetimes as ISO 8601 in UTC (`Z`); times on screen follow `render_time`, a run's timeline
is `render_runs`. Malformed input raises UsageError (exit 2) with an example.
Text from a model, the world or a person passes through `safe()` before it reaches a terminal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from agentd.config import Config
from agentd.errors import UsageError
from agentd.models import JSON, Event, Goal, InboxItem, InboxKind, Run, Step, StepKind
from agentd.views.times import iso, local, relative, stamp
from agentd.views.times import parse_when as parse_when  # `goal add --deadline` reads it here

Row = Sequence[object]

# ── help text, and the text `agentd init` writes ─────────────────────────────────────────────

HOME_HELP = (
    "State directory with config.toml and agentd.db; allowed anywhere on the line "
    "[default: $AGENTD_HOME, else $XDG_DATA_HOME/agentd or ~/.local/share/agentd]."
)

# `agentd init` writes these when the package ships no config.example.toml / no replies file.
FALLBACK_CONFIG = """\
# agentd configuration. `agentd doctor` checks it; config.example.toml documents every key.
[models.default]
provider = "scripted"          # canned replies from replies.json; no API key needed
replies = "replies.json"

[agents.default]
description = "A general agent: notes, questions, waits and finishes."
model = "default"
actions = ["notify", "ask", "sleep", "finish"]
"""
PLACEHOLDER_REPLIES = """[
  {"reason": "nothing to do yet",
   "action": {"kind": "finish", "outcome": "succeeded",
              "summary": "edit replies.json or configure a real model"}}
]
"""


# ── neutralising text from models and the world ──────────────────────────────────────────────

# Printable by Python's measure, yet invisible: fillers, joiners and selectors that hide or smuggle
# text. Everything `str.isprintable()` rejects (C0/C1 controls, DEL, bidi overrides and isolates,
# zero-width and other format characters, line separators, unassigned code points) is escaped too.
_INVISIBLE = re.compile(
    r"[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0\U000e0100-\U000e01ef]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Starts every further line of a multi-line written text, so that line cannot pose as a field.
CONTINUATION = "  │ "


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _escape_line(text: str, keep: str) -> str:
    if text.isprintable() and not _INVISIBLE.search(text):
        return text  # the common case, checked in C
    return "".join(
        ch if ch in keep or (ch.isprintable() and not _INVISIBLE.match(ch)) else _escape(ch)
        for ch in text
    )


def safe(text: object, *, multiline: bool = False, continuation: str = CONTINUATION) -> str:
    """`text` as it may be shown on a terminal: control, bidi and invisible characters become
    visible escapes (ESC → `\\x1b`, U+202E → `\\u202e`), so nothing a model or the world wrote can
    move the cursor, clear the screen, reorder what is shown or hide characters.

    Newlines become `\\n` unless `multiline`; then they are kept (with tabs), and each further line
    starts with `continuation`, so a written line never starts where a field or a heading would.
    """
    text = "" if text is None else str(text)
    if not multiline:
        return _escape_line(text, "")
    lines = text.replace("\r\n", "\n").split("\n")
    return ("\n" + continuation).join(_escape_line(line, "\t") for line in lines)


def screen(text: str) -> str:
    """The last pass over a whole rendered view or message: keeps its lines, escapes the rest."""
    return safe(text, multiline=True, continuation="")


def _ascii_json(value: Any, **options: Any) -> str:
    """JSON with every character outside printable ASCII escaped (`\\u202e`, DEL too); decoders
    read the same text back."""
    return json.dumps(jsonable(value), ensure_ascii=True, **options)


def canonical(value: Any) -> str:
    """Arguments as shown in the authoritative block: sorted keys, one key a line, everything
    outside printable ASCII escaped, so a look-alike letter shows as `\\u0430`."""
    return _ascii_json(value, indent=2, sort_keys=True)


# ── primitives ───────────────────────────────────────────────────────────────────────────────


def _wait_json(wait: Any) -> Any:
    """A wait's `until` (unix seconds inside) as ISO 8601, like every other --json time."""
    if isinstance(wait, dict) and isinstance(wait.get("until"), int | float):
        with contextlib.suppress(ValueError, OverflowError, OSError):
            return {**wait, "until": iso(datetime.fromtimestamp(wait["until"], UTC))}
    return wait


def jsonable(value: Any) -> Any:
    """Dataclasses as objects, datetimes as `2026-03-01T17:00:00Z` (a run's wait time too),
    everything else as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, Run):
            out["wait"] = _wait_json(out["wait"])
        elif isinstance(value, Step) and value.kind == StepKind.WAIT:
            out["data"] = _wait_json(out["data"])
        return out
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """--json output: every value in full; control, bidi and other non-ASCII characters escaped."""
    return _ascii_json(value, indent=2)


def compact(value: Any) -> str:
    """One-line JSON for arguments and results inside a table cell."""
    return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False, default=str)


def _line(value: object) -> str:
    """Whitespace (newlines too) collapsed to single spaces, then neutralised."""
    return safe(" ".join(str("" if value is None else value).split()))


def one_line(value: object, width: int = 60) -> str:
    """Whitespace collapsed to single spaces, neutralised, cut to `width` characters with an …."""
    text = _line(value)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def table(headers: Row, rows: Sequence[Row], widths: dict[str, int], empty: str = "") -> str:
    """Plain aligned columns; `widths` caps a column (by header) so rows stay on one line."""
    if not rows:
        return empty
    cells = [
        [one_line(v, widths.get(str(h), 80)) for h, v in zip(headers, r, strict=True)] for r in rows
    ]
    sizes = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [[str(h).upper() for h in headers], *cells]
    return "\n".join(
        "  ".join(c.ljust(n) for c, n in zip(r, sizes, strict=True)).rstrip() for r in lines
    )


def _fields(pairs: Sequence[tuple[str, object]]) -> str:
    """`label:  value` lines; a multi-line value continues under the value column.

    Values arrive already passed through `safe()` where they hold written text; the newlines left
    are the view's own (a JSON layout, a list), and any control character left is escaped here.
    """
    pad = max(len(k) for k, _ in pairs) + 2
    out = []
    for key, value in pairs:
        lines = screen(str(value)).split("\n")
        out.append(f"{key + ':':<{pad}}{lines[0]}")
        out.extend(" " * pad + line for line in lines[1:])
    return "\n".join(out)


# ── input ───────────────────────────────────────────────────────────────────────────────────


def parse_object(option: str, text: str) -> JSON:
    """A JSON object given on the command line; anything else is a usage error."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(
            f"{option}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            f"""give an object, e.g. {option} '{{"key": "value"}}'"""
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"{option}: expected a JSON object {{...}}, got {type(value).__name__}")
    return value


def pick_agent(cfg: Config, wanted: str | None, path: Path) -> str:
    """The agent for a new goal: --agent if configured, else the only one, else `default`."""
    names = ", ".join(sorted(cfg.agents))
    if not cfg.agents:
        raise UsageError(f"{path} defines no agents; add an [agents.NAME] table first")
    if wanted is None:
        if len(cfg.agents) == 1:
            return next(iter(cfg.agents))
        if "default" in cfg.agents:
            return "default"
        raise UsageError(f"which agent? pass --agent NAME; {path} defines: {names}")
    if wanted not in cfg.agents:
        raise UsageError(f"no agent {wanted!r} in {path}; it defines: {names}")
    return wanted


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
    head = _fields(
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
        ]
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
        return _line(text)
    return _line(f"{text} until {stamp(wake_at, now) if now else local(wake_at, wake_at)}")


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
    return table(headers, rows, {"waiting for": 36, "summary": 50}, hint)


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
        fields.append(("notify", _notify_line(data["notify"])))
    head = _fields(fields)
    parts = [head]
    if data["active_runs"]:
        parts.append("active runs:\n" + runs_table(data["active_runs"], now))
    home_now = data["now"]
    looks = [
        (x["goal_id"], local(x["at"], home_now), relative(x["at"], home_now), x["why"], x["title"])
        for x in data["next_checkins"]
    ]
    hint = "none planned (no active goal, or the daemon has not planned one yet)"
    looks_table = table(("goal", "at", "in", "why", "title"), looks, {"why": 40, "title": 40}, hint)
    parts.append(f"next check-ins:\n{looks_table}")
    return "\n\n".join(parts)


def _notify_line(health: JSON) -> str:
    """`ops ok · pager failing (3 waiting: HTTP 503)`: each channel the outbox has used."""
    parts = []
    for name, h in health.items():
        if h["failing"]:
            parts.append(
                f"{safe(name)} failing ({h['pending']} waiting: {safe(str(h['error']))[:80]})"
            )
        else:
            parts.append(
                f"{safe(name)} ok" + (f" ({h['pending']} waiting)" if h["pending"] else "")
            )
    return " · ".join(parts) + (
        "; see `agentd doctor`" if any(h["failing"] for h in health.values()) else ""
    )


# ── inbox and events ─────────────────────────────────────────────────────────────────────────

WRITTEN = "written by the model or taken from the world; agentd has not checked it:"
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
            relative(i.expires_at, now),
        )
        for i in items
    ]
    if with_status:
        headers += ("status",)
        rows = [(*row, i.status) for row, i in zip(rows, items, strict=True)]
    hint = "no inbox items" if with_status else "nothing open in the inbox"
    return table(headers, rows, {"title": 50}, hint)


def item_view(item: InboxItem, goal: Goal | None, now: datetime) -> str:
    """An item in full: its facts; then the text a model or the world wrote, every line marked;
    then, for an approval and after a rule, the action and arguments that will execute."""
    pairs: list[tuple[str, object]] = [
        ("item", f"{item.item_id}  {item.kind}  [{item.status}]"),
        ("title", safe(item.title)),
        ("goal", f"{goal.goal_id}: {safe(goal.title)}" if goal else "-"),
        ("run", f"{item.run_id} (agentd runs show {item.run_id})" if item.run_id else "-"),
        ("created", stamp(item.created_at, now)),
        ("expires", stamp(item.expires_at, now)),
    ]
    if item.rule:
        pairs.append(("rule", safe(item.rule)))
    pairs.append(("answer", safe(item.answer or "-", multiline=True)))
    if item.resolved_at:
        pairs.append(("closed", stamp(item.resolved_at, now)))
    parts = [_fields(pairs), f"{WRITTEN}\n{_written(item)}"]
    if item.kind == InboxKind.APPROVAL:
        parts.append(_authoritative(item))
    if moves := _next_moves(item):
        parts.append(moves)
    return "\n\n".join(parts)


def _written(item: InboxItem) -> str:
    """The item's body (and the model's reason when the body lacks it), each line marked `│`."""
    texts = [item.body] if item.body.strip() else []
    reason = item.data.get("reason")
    if isinstance(reason, str) and reason.strip() and reason not in item.body:
        texts.append(f"reason: {reason}")
    return CONTINUATION + safe("\n".join(texts) or "-", multiline=True)


def _authoritative(item: InboxItem) -> str:
    """The exact action the approval is bound to, last on the screen: canonical, escaped JSON."""
    pairs: list[tuple[str, object]] = [
        ("action", safe(item.action or "-")),
        ("arguments", canonical(item.args or {})),
    ]
    if (resolved := item.data.get("resolved")) is not None:
        pairs.append(("resolves to", canonical(resolved)))
    pairs.append(("digest", safe((item.digest or "-")[:12])))
    fields = "\n".join("  " + line for line in _fields(pairs).split("\n"))
    what = "will execute if approved" if item.status == "open" else "this approval was bound to"
    return f"{RULE}\n{AUTHORITATIVE} what {what} (from agentd, not the model):\n{fields}\n{RULE}"


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
        (e.event_id, e.name, e.dedupe_key or "-", relative(e.created_at, now), compact(e.data))
        for e in events
    ]
    hint = "no events; send one with `agentd event send NAME`"
    return table(("id", "name", "key", "created", "data"), rows, {"key": 24, "data": 60}, hint)


# ── doctor ───────────────────────────────────────────────────────────────────────────────────


class Check(NamedTuple):
    """One `agentd doctor` finding; a failed check that is not `required` is only information."""

    name: str
    ok: bool
    message: str
    required: bool = True


def checks_text(checks: Sequence[Check]) -> str:
    lines = []
    for check in checks:
        mark = "ok" if check.ok else ("FAIL" if check.required else "info")
        first, *rest = [safe(line) for line in check.message.splitlines()] or [""]
        lines.append(f"{mark:<5} {safe(check.name):<14} {first}")
        lines.extend(f"{'':<20} {line}" for line in rest)
    return "\n".join(lines)


def usage_table(rows: Sequence[JSON]) -> str:
    headers = ("day", "goal", "model", "calls", "tokens in", "tokens out", "cached", "usd")
    cells = [
        (r["day"], r["goal_id"], r["model"], r["calls"], r["tokens_in"], r["tokens_out"],
         r["tokens_cached"], f"{r['usd']:.4f}")
        for r in rows
    ]  # fmt: skip
    total = sum(float(r["usd"]) for r in rows)
    body = table(headers, cells, {"model": 40}, empty="no model calls in that period")
    return f"{body}\n\ntotal: {total:.4f} USD" if rows else body
