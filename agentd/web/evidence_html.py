"""The evidence summary of an item's page, as agentd made it from the world and the run's
journal (agentd/views/evidence.py, never the model): a line per source — its state word as a
badge where the CLI says one, since when, its codes, streak and last healthy look — with the
lines it quotes (error lines marked, and the mark explained), then, under their own heading, the
run's last actions and what came of them. A log quotes its error lines first, then its newest
(agentd/views/evidence.py), so on a phone a long quote shows those and folds the older rest, and
the page stays short; the raw world stays folded below."""

from __future__ import annotations

from datetime import datetime

from agentd.models import JSON
from agentd.text import one_line
from agentd.views import evidence as ev
from agentd.views.times import relative
from agentd.web.html import badge, h

STATE_CSS = {"unhealthy": "failed", "check_failed": "expired", "healthy": "succeeded"}
ACTION_CSS = {"ok": "succeeded", "running": "open", "failed": "failed", "refused": "failed",
              "denied": "denied", "expired": "expired"}  # fmt: skip
SHOWN = 3  # a source's quoted lines shown before the rest fold (on a narrow screen: html.STYLE)


def summary(evidence: JSON | None, now: datetime) -> str:
    """The section `#evidence` (sources in `#sources`, actions in `#actions`), or "" when there
    is nothing to show (a home-wide notice)."""
    if not evidence:
        return ""
    sources = evidence.get("sources") or []
    actions = evidence.get("actions") or []
    started = evidence.get("started_by")
    if not sources and not actions and not started:
        return ""
    parts = ["<h2>Evidence</h2>"]
    if started:  # the alert or webhook that started the run (escaped: a sender's text)
        note = f"<br>{h(str(started['summary']))}" if started.get("summary") else ""
        parts.append(f'<p id="started-by">{h(ev.started_line(started))}{note}</p>')
    if sources:
        parts.append(
            f'<ul class="ev" id="sources">{"".join(_source(s, now) for s in sources)}</ul>'
        )
        if any(d["error"] for s in sources for d in s.get("detail") or []):
            parts.append(f'<p class="hint" id="mark">{h(ev.ERROR_MARK)}</p>')
    if actions:
        parts.append("<h3>Last actions</h3>")
        parts.append(
            f'<ul class="ev" id="actions">{"".join(_action(a, now) for a in actions)}</ul>'
        )
    return f'<section id="evidence">{"".join(parts)}</section>'


def _action(action: JSON, now: datetime) -> str:
    try:
        when = relative(datetime.fromisoformat(str(action["at"]).replace("Z", "+00:00")), now)
    except ValueError:
        when = ""
    # The outcome is the CLI's words and starts with the status (`ok · exit 0`, `refused: …`):
    # the status colours it, rather than saying it again as a badge.
    css = ACTION_CSS.get(action["status"], "")
    return (
        f'<li><strong>{h(action["action"])}</strong> <span class="o-{css}">'
        f'{h(one_line(action["outcome"], 160))}</span> <span class="meta">{h(when)}</span></li>'
    )


def _source(source: JSON, now: datetime) -> str:
    # The state word and whether there is one are the CLI's (views/evidence.py state_word).
    word = ev.state_word(source)
    lead = badge(word, STATE_CSS.get(str(source.get("state")), "")) if word else ""
    since = ev.since_part(source, now)
    head = " · ".join(h(p) for p in [*([since] if since else []), *ev.fact_parts(source, now)])
    lines = [
        f'<code class="{"q err" if d["error"] else "q"}">'
        f"{'! ' if d['error'] else ''}{h(one_line(d['text'], 160))}</code>"
        for d in source.get("detail") or []
    ]
    quoted = "".join(lines[:SHOWN])
    if len(lines) > SHOWN:
        # Folded on a phone only: on a wide screen the rest shows open (the style's media rule).
        quoted += (
            f'<details class="more"><summary>{len(lines) - SHOWN} more lines</summary>'
            f"{''.join(lines[SHOWN:])}</details>"
        )
    if source.get("more"):  # a log's oldest lines, not quoted: the raw world has them
        quoted += f'<span class="meta more-lines">… {source["more"]} older lines</span>'
    return f"<li><strong>{h(source['name'])}</strong> {lead} {head}{quoted}</li>"
