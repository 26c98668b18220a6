"""Text made inert and JSON made canonical: what every surface, the log and the notifications use
before a model's, the world's or a person's text reaches a terminal, a page or a message.

Pure functions; the ground: imports only agentd.models.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from datetime import UTC, datetime
from typing import Any

from agentd.models import Run, Step, StepKind

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


def iso(dt: datetime) -> str:
    """`2026-03-01T17:00:00Z` (fractions of a second kept): what every --json time looks like."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ── JSON and one-line cells ──────────────────────────────────────────────────────────────────


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


def single_line(value: object) -> str:
    """Whitespace (newlines too) collapsed to single spaces, then neutralised."""
    return safe(" ".join(str("" if value is None else value).split()))


def one_line(value: object, width: int = 60) -> str:
    """Whitespace collapsed to single spaces, neutralised, cut to `width` characters with an …."""
    text = single_line(value)
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
