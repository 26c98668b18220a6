"""What a person types, parsed: a future time (`--deadline 3d`), a JSON object on the command line,
the agent for a new goal. Bad input raises UsageError (exit 2) with the right form and an example.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from agentd.errors import UsageError
from agentd.models import JSON
from agentd.views.times import local, relative

if TYPE_CHECKING:
    from agentd.config import Config

_DELAY = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$", re.ASCII)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
WHEN_HELP = (
    "A future time: a delay (90m, 12h, 3d, 2w) or ISO 8601 (2026-03-01, 2026-03-01T17:00, "
    "2026-03-01T17:00Z, 2026-03-01T17:00+02:00); without a zone it is local time."
)


def parse_when(value: str, now: datetime, option: str = "--deadline") -> datetime:
    """A future time typed on the command line: a delay from now (90m, 12h, 3d, 2w) or ISO 8601
    (a date or a datetime; without a zone it is read in the local zone). In UTC."""
    if _DELAY.match(value.strip().lower().removeprefix("-")) and value.strip().startswith("-"):
        raise UsageError(
            f"{option} {value!r} is a negative delay: a delay counts forward from now, e.g. 3d"
        )
    try:
        if m := _DELAY.match(value.strip().lower()):
            when = now + timedelta(seconds=float(m[1]) * _UNIT_S[m[2]])
        else:  # astimezone() reads a naive time as local time
            when = datetime.fromisoformat(value.strip()).astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        raise UsageError(
            f"{option} {value!r} is not a time; use ISO 8601 (2026-03-01, 2026-03-01T17:00, "
            "2026-03-01T17:00+02:00; without a zone it is local time) or a delay like 90m, 12h, 3d"
        ) from None
    if when <= now:
        raise UsageError(
            f"{option} {value!r} is in the past ({local(when, now)}, {relative(when, now)}); "
            "give a future time, e.g. 3d or a later date"
        )
    return when


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
