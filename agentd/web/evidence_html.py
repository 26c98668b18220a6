"""The evidence summary of an item's page, as agentd made it from the world and the run's
journal (agentd/views/evidence.py, never the model): a line per source — its state, since when,
its codes and streak — with the lines it quotes (errors marked), then the run's last actions and
what came of them. A few lines read in seconds; the raw world stays folded below."""

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


def summary(evidence: JSON | None, now: datetime) -> str:
    """The section `#evidence`, or "" when there is nothing to show (a home-wide notice)."""
    if not evidence:
        return ""
    lines = [_source(s, now) for s in evidence.get("sources") or []]
    for a in evidence.get("actions") or []:
        try:
            when = relative(datetime.fromisoformat(str(a["at"]).replace("Z", "+00:00")), now)
        except ValueError:
            when = ""
        lines.append(
            f"<li><strong>{h(a['action'])}</strong> {badge(a['status'], ACTION_CSS.get(a['status'], ''))}"
            f' {h(one_line(a["outcome"], 160))} <span class="meta">{h(when)}</span></li>'
        )
    if not lines:
        return ""
    return f'<section id="evidence"><h2>Evidence</h2><ul class="ev">{"".join(lines)}</ul></section>'


def _source(source: JSON, now: datetime) -> str:
    state = source.get("state")
    parts = ev.headline_parts(source, now)
    head = " · ".join(h(p) for p in parts)
    mark = badge(str(state).replace("_", " "), STATE_CSS.get(str(state), "")) if state else ""
    quoted = "".join(
        f"<br><code>{'! ' if d['error'] else ''}{h(one_line(d['text'], 160))}</code>"
        for d in source.get("detail") or []
    )
    return f"<li><strong>{h(source['name'])}</strong> {mark} {head}{quoted}</li>"
