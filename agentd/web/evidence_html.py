"""The evidence summary of an item's page, made by agentd from the record, not by the model: a
line per source of the world the run saw (its state and the facts that say it: status, latency,
error, since when, streak, the start of a body or an output), then the run's last actions and
what they returned. A few lines an operator reads in seconds; the raw world stays folded below."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentd.models import InboxItem, Step, StepKind, StepStatus
from agentd.text import one_line
from agentd.views.changes import result_head
from agentd.views.times import relative
from agentd.web.html import badge, h

# The facts of an observation worth a glance, in this order; the rest stays in the raw world.
FACTS = ("status", "exit_code", "latency_ms", "error", "since", "streak", "title")
TEXTS = ("body", "stdout", "lines", "text", "tail")  # the start of one is shown
LAST_ACTIONS = 3
SOURCES = 6


def summary(item: InboxItem, steps: Sequence[Step], now: datetime) -> str:
    world = item.data.get("world")
    lines = []
    if isinstance(world, dict):
        lines += [_source(name, obs, now) for name, obs in list(world.items())[:SOURCES]]
    acts = [s for s in steps if s.kind == StepKind.ACT and s.status != StepStatus.STARTED]
    for s in acts[-LAST_ACTIONS:]:
        result = result_head(s.result) if s.result is not None else "no result"
        when = relative(s.created_at, now)
        lines.append(
            f"<li><strong>{h(s.action or '-')}</strong> ran {h('just now' if when == 'now' else when)}: "
            f"{h(one_line(result, 160))}</li>"
        )
    if not lines:
        return ""
    return f'<section id="evidence"><h2>Evidence</h2><ul class="ev">{"".join(lines)}</ul></section>'


def _state(obs: dict[str, Any]) -> str:
    if "ok" not in obs:
        return ""
    if obs.get("check_failed"):
        return badge("check failed", "expired")
    return badge("healthy", "succeeded") if obs["ok"] else badge("unhealthy", "failed")


def _since(value: Any, now: datetime) -> str:
    """An ISO time as `3m ago` (what a person reads at a glance); anything else as it is."""
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return relative(at, now) if at.tzinfo is not None else str(value)


def _source(name: str, obs: Any, now: datetime) -> str:
    if not isinstance(obs, dict):
        return f"<li><strong>{h(name)}</strong> {h(one_line(str(obs), 160))}</li>"
    facts = []
    for key in FACTS:
        value = obs.get(key)
        if value is None or value == "":
            continue
        shown = (
            f"{value} ms"
            if key == "latency_ms"
            else _since(value, now)
            if key == "since"
            else str(value)
        )
        facts.append(f"{h(key.removesuffix('_ms'))} <code>{h(one_line(shown, 80))}</code>")
    text = next((obs[k] for k in TEXTS if isinstance(obs.get(k), str) and obs[k].strip()), "")
    if isinstance(text, str) and text:
        facts.append(f"<code>{h(one_line(text, 120))}</code>")
    return f"<li><strong>{h(name)}</strong> {_state(obs)} {' · '.join(facts)}</li>"
