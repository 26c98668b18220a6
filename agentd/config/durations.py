"""One duration syntax for every seconds key of config.toml (`*_s`): 90, "90", "90s", "45m",
"4h", "1d12h", "2w" — the notify settings' syntax, now the watch's and the check-in's too."""

from __future__ import annotations

import re
from typing import Any

# A small parser of its own: the outer loop's parse_duration sits in a layer above the config.
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.ASCII)
_NUMBER = re.compile(r"\d+(?:\.\d+)?", re.ASCII)  # plain seconds, as "90"
_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def duration_s(value: object) -> float:
    """Seconds in 90, "90", "90s", "45m", "4h", "1d12h", "2w"."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"duration {value!r} is not valid: write e.g. 90s, 45m, 4h or 1d")
    # float() alone would take "٣", "1e3", "1_0" and "inf": only ASCII digits, as agentd writes them
    if not isinstance(value, str):
        seconds = float(value)
    elif _NUMBER.fullmatch(value.strip()):
        seconds = float(value.strip())
    else:
        raw = value.strip().lower()
        parts = _DURATION.findall(raw)
        if not parts or _DURATION.sub("", raw).strip():
            raise ValueError(
                f'duration "{value}" is not valid: write e.g. 90s, 45m, 4h or 1d'
            ) from None
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not 0 < seconds < 10 * 365 * 86400:
        raise ValueError(f"duration {value!r} must be positive and under 10 years")
    return seconds


def seconds_keys(data: Any) -> Any:
    """A config table with the text of each `*_s` key read as a duration (numbers as they are;
    "0" stays 0 where a key allows it), for a model validator before the fields are checked."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for key, value in data.items():
        if isinstance(key, str) and key.endswith("_s") and isinstance(value, str):
            try:
                out[key] = 0.0 if value.strip() in ("0", "0s") else duration_s(value)
            except ValueError as e:
                raise ValueError(f"{key}: {e}") from None
    return out
