"""Goal memory as the outer loop uses it: what a goal knows, bounded, durable, and shown by `agentd
goal show`. It — not raw history — feeds every check-in prompt.

The rows and their bounds live in `agentd.db.memory` (runs write their outcome there as they finish,
in the same transaction, and the engine sits below this package); this module is the outer loop's
face of it: `remember` / `recall` plus the text forms for people and prompts.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agentd.db.memory import MAX_ENTRIES, MAX_SHOWN_CHARS, answers, recall, remember
from agentd.models import JSON
from agentd.outer.checkin_prompt import render_memory

__all__ = [
    "MAX_ENTRIES",
    "MAX_SHOWN_CHARS",
    "answers",
    "for_prompt",
    "lines",
    "recall",
    "remember",
]


def for_prompt(entries: list[JSON]) -> str:
    """The memory block of a check-in prompt (the operator's answers framed as their words)."""
    return render_memory(entries)


def lines(entries: list[JSON]) -> list[str]:
    """One line per entry for `goal show`: `2026-03-07 09:00  answer  the party is for 12`."""
    out = []
    for e in entries:
        when = datetime.fromtimestamp(float(e["at"]), UTC).strftime("%Y-%m-%d %H:%M")
        out.append(f"{when}  {e['kind']:<9} {e['text']}")
    return out
