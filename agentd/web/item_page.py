"""An inbox item's page, laid out for a phone: the decision on the first screen. For an approval:
what will execute (agentd's own record, bound by its digest), the controls (Approve, Deny, Edit…),
why (the run's reason, marked as the model's words) and the evidence summary; then, folded, the
agent's full text and the raw world. A runbook's question gets its answers (stop, retry, skip) as
buttons; other questions a text box; notices Dismiss (and Accept for a nudge)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentd.llm.runbook import ANSWERS, VOCABULARY
from agentd.models import JSON, Goal, InboxItem, InboxKind
from agentd.text import canonical, one_line
from agentd.views.evidence import split_world
from agentd.views.times import relative
from agentd.web import evidence_html
from agentd.web.edit import ArgField
from agentd.web.edit_form import edit_form
from agentd.web.html import badge, expiry, h, json_text, page, pairs, post_form

RUNBOOK_HELP = {"stop": "finish the run", "retry": "start over", "skip": "go on without it"}


def kind_word(item: InboxItem) -> str:
    """The badge of an item: approval, question, nudge or notice."""
    return "nudge" if item.rule == "nudge" else str(item.kind)


def meta_line(item: InboxItem, goal: Goal | None, now: datetime) -> str:
    """Kind, status, goal, age and time to expiry, in one line under the title."""
    parts = [badge(kind_word(item), kind_word(item)) + " " + badge(item.status, item.status)]
    if goal is not None:
        parts.append(f'<a href="/goals/{goal.goal_id}">{h(one_line(goal.title, 60))}</a>')
    parts.append(f"raised {h(relative(item.created_at, now))}")
    if item.status == "open" and item.expires_at is not None:
        parts.append(expiry(item.expires_at, now))
    return f'<p class="meta">{" · ".join(parts)}</p>'


def item_page(
    item: InboxItem,
    goal: Goal | None,
    fields: Sequence[ArgField],
    evidence: JSON | None,
    raw: Sequence[tuple[str, Any]],
    now: datetime,
    *,
    flash: str = "",
    error: str = "",
) -> str:
    """`evidence`: agentd's summary (agentd/operator/evidence.py); `raw`: the item's data
    (web/data.py `evidence`), folded at the end."""
    parts = [meta_line(item, goal, now)]
    if item.kind == InboxKind.APPROVAL:
        parts.append(_bound(item))
    if item.status == "open":
        parts.append(_controls(item, fields))
    elif item.answer:
        parts.append(f'<p class="meta">Answer: {h(one_line(item.answer, 300))}</p>')
    parts.append(_why(item))
    parts.append(evidence_html.summary(evidence, now))
    parts.append(_folded(item, raw))
    title = f"Item {item.item_id}: {one_line(item.title, 80)}"
    return page(title, "".join(parts), flash=flash, error=error)


def _bound(item: InboxItem) -> str:
    """What the approval is bound to, from agentd's record (never the model's prose)."""
    what = "Will execute if approved" if item.status == "open" else "This approval was bound to"
    rows = [("action", f"<code>{h(item.action or '-')}</code>")]
    rows.append(("args", f"<code>{h(canonical(item.args or {}), multiline=True)}</code>"))
    if (resolved := item.data.get("resolved")) is not None:
        rows.append(("runs", f"<code>{h(_resolved_text(resolved), multiline=True)}</code>"))
    rows.append(("digest", f"<code>{h((item.digest or '-')[:12])}</code>"))
    return (
        f'<section class="bound" id="execute"><h2>{what} · from agentd, not the model</h2>'
        f"{pairs(rows)}</section>"
    )


def _resolved_text(resolved: Any) -> str:
    """A command's argv as one line, a request as METHOD URL; anything else as canonical JSON."""
    if isinstance(resolved, dict):
        argv = resolved.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
        if isinstance(resolved.get("url"), str):
            return f"{resolved.get('method', 'GET')} {resolved['url']}"
    return canonical(resolved)


def _controls(item: InboxItem, fields: Sequence[ArgField]) -> str:
    n = item.item_id
    if item.kind == InboxKind.APPROVAL:
        # The plain form sends no argument: it approves exactly what is shown above.
        approve = post_form(f"/items/{n}/approve", "", "Approve", form_id="approve-form", css="go")
        edit = edit_form(n, fields) if fields else ""
        reason = '<input type="text" name="text" placeholder="Reason to deny (optional)">'
        deny = (
            f'<form method="post" action="/items/{n}/deny" id="deny-form" class="wide">'
            f'{reason}<button class="stop">Deny</button></form>'
        )
        return f'<div class="decide" id="decide">{approve}{edit}{deny}</div>'
    if item.kind == InboxKind.QUESTION:
        return _answers(item)
    reason = '<input type="text" name="text" placeholder="Reason (optional)">'
    dismiss = (
        f'<form method="post" action="/items/{n}/dismiss" id="dismiss-form" class="wide">'
        f"{reason}<button>Dismiss</button></form>"
    )
    accept = ""
    if item.rule == "nudge":
        accept = post_form(f"/items/{n}/accept", "", "Accept", form_id="accept-form", css="go")
    return f'<div class="decide" id="decide">{accept}{dismiss}</div>'


def _answers(item: InboxItem) -> str:
    """A runbook's question: its three words as buttons (and any other answer, folded); any
    other question: a text box."""
    n = item.item_id
    text = '<label>Your answer<textarea name="text" rows="2" required></textarea></label>'
    free = post_form(f"/items/{n}/answer", text, "Answer", form_id="answer-form", css="go")
    if VOCABULARY not in item.body:
        return f'<div id="decide">{free}</div>'
    buttons = "".join(
        post_form(
            f"/items/{n}/answer",
            f'<input type="hidden" name="text" value="{word}">',
            f"{word.capitalize()} <small>· {RUNBOOK_HELP.get(word, '')}</small>",
            form_id=f"answer-{word}",
            css="go" if word == "retry" else "stop" if word == "stop" else "",
        )
        for word in ANSWERS
    )
    other = f'<details data-keep><summary class="button">Other answer…</summary>{free}</details>'
    return f'<div class="decide" id="decide">{buttons}{other}</div>'


def _why(item: InboxItem) -> str:
    """The run's reason (an approval), the question or the notice as the model or the agent
    wrote it: marked as such, never as agentd's word."""
    reason = item.data.get("reason")
    if item.kind == InboxKind.APPROVAL and isinstance(reason, str) and reason.strip():
        who, said = "Why · the model's words, not checked by agentd", reason
    elif item.kind == InboxKind.QUESTION:
        who, said = "The question · the model's words", item.body or item.title
    else:
        nudge = item.data.get("nudge") if item.rule == "nudge" else None
        message = nudge.get("message") if isinstance(nudge, dict) else None
        said = message if isinstance(message, str) and message else item.body or item.title
        who = "What it says · written by the agent"
    text = f"<p>{h(one_line(said, 600))}</p>"
    suggested = (item.data.get("nudge") or {}).get("suggested") if item.rule == "nudge" else None
    if isinstance(suggested, dict) and suggested.get("action"):
        args = canonical(suggested.get("args") or {})
        text += f"<p>Accept runs <code>{h(suggested['action'])} {h(one_line(args, 200))}</code></p>"
    return f'<section class="words" id="why"><p class="who">{who}</p>{text}</section>'


def _folded(item: InboxItem, raw: Sequence[tuple[str, Any]]) -> str:
    """The agent's full text and the item's raw data (the world at the time), folded."""
    text = split_world(item.body or "")[0].rstrip()  # the world it quotes is folded below, once
    body = (
        '<details id="full-text"><summary>What the agent wrote, in full</summary>'
        f"<pre>{h(text or '-', multiline=True)}</pre></details>"
    )
    if not raw:
        return body
    data = "".join(f"<h3>{h(k)}</h3><pre>{json_text(v)}</pre>" for k, v in raw)
    world = f'<details id="world"><summary>Raw world and data</summary>{data}</details>'
    return body + world
