"""Nudge quality as a person reads it: the `agentd checkins report` table and the `status`
call-out of goals whose nudges are mostly dismissed (agentd/operator/nudges.py computes both)."""

from __future__ import annotations

import textwrap

from agentd.models import JSON
from agentd.views.tables import table, terminal_width


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _cadence(e: JSON) -> str:
    steps = e["backoff_steps"]
    return "as planned" if not steps else f"backed off {steps} step{'s' if steps > 1 else ''}"


def report_text(entries: list[JSON]) -> str:
    """One row per nudged goal: nudges, the shares, the median reaction, the cadence's change."""
    rows = [
        (e["goal_id"], e["nudges"], _pct(e["accepted_share"]), _pct(e["dismissed_share"]),
         _pct(e["ignored_share"]), e["open"], _duration(e["median_reaction_s"]), _cadence(e),
         e["title"])
        for e in entries
    ]  # fmt: skip
    headers = ("goal", "nudges", "accepted", "dismissed", "ignored", "open", "reaction",
               "cadence", "title")  # fmt: skip
    body = table(headers, rows, {"title": 40, "cadence": 20}, "no goal has been nudged yet",
                 drop=("title",))  # fmt: skip
    flagged = [e for e in entries if e["mostly_dismissed"]]
    if not flagged:
        return body
    return f"{body}\n\n{dismissed_text(flagged)}"


def dismissed_text(flagged: list[JSON]) -> str:
    """The goals whose nudges are mostly dismissed, and what the cadence already does about it."""
    lines = []
    for e in flagged:
        steps = e["backoff_steps"]
        backed = (f"its check-ins already back off ({steps} step{'s' if steps != 1 else ''})"
                  if steps else "its check-ins back off at each dismissal")  # fmt: skip
        lines.append(f"goal {e['goal_id']}: {e['dismissed']} of {e['nudges']} nudges dismissed; "
                     f"{backed}")  # fmt: skip
    hint = ("tell the goal what you want nudges about (`agentd goal show ID`), or widen its "
            "cadence with `agentd goal cadence ID --min 3d`")  # fmt: skip
    lines += textwrap.wrap(hint, terminal_width() or len(hint), break_on_hyphens=False)
    return "\n".join(lines)
