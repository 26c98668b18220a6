"""What a step changed and what an action returned, as lines: world changes as field and line diffs,
a result's head and its stdout/stderr tails (the timeline and the demo's narration use them).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from agentd.models import JSON
from agentd.text import compact, safe

DIFF_LINES = 4  # changed lines of one field the timeline shows (all of them: --step N)
OUTPUT_LINES = 3  # lines of an action's stdout/stderr the timeline shows
_NOISE = frozenset(("ok", "error", "stdout", "stderr", "argv", "truncated", "timed_out"))


# ── world changes as diffs ───────────────────────────────────────────────────────────────────


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else compact(value)


def _as_lines(value: Any) -> list[str] | None:
    """A value that reads best as lines: a list of scalars, or text of several lines."""
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return [as_text(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return value.splitlines()
    return None


def _line_diff(old: list[str], new: list[str]) -> Iterator[str]:
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            yield from (f"- {line}" for line in old[i1:i2])
            yield from (f"+ {line}" for line in new[j1:j2])


def _field_diff(path: str, old: Any, new: Any, limit: int | None) -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            if old.get(key) != new.get(key):
                yield from _field_diff(f"{path}.{key}", old.get(key), new.get(key), limit)
        return
    old_lines, new_lines = _as_lines(old), _as_lines(new)
    if old_lines is not None or new_lines is not None:
        if old_lines is None and old is not None:
            old_lines = [as_text(old)]
        if new_lines is None and new is not None:
            new_lines = [as_text(new)]
        diff = list(_line_diff(old_lines or [], new_lines or []))
        shown = diff if limit is None else diff[:limit]
        yield f"{path}:"
        yield from ("  " + d for d in shown)
        if len(diff) > len(shown):
            yield f"  … {len(diff) - len(shown)} more changed lines"
        return
    yield f"{path}: {'-' if old is None else as_text(old)} → {'-' if new is None else as_text(new)}"


def world_diff(changes: JSON, limit: int | None = None) -> list[str]:
    """`{source: {field: [old, new]}}` as readable lines, neutralised; at most `limit` changed
    lines of each field that reads as lines (None: all). Sources and fields in name order: the
    same lines whatever order the store hands an object's keys back in (PostgreSQL's jsonb
    keeps its own)."""
    out: list[str] = []
    for source, fields in sorted(changes.items()):
        if not isinstance(fields, dict):
            out.append(
                f"{source}: first look" if fields == "new" else f"{source}: {as_text(fields)}"
            )
            continue
        for name, pair in sorted(fields.items()):
            if isinstance(pair, list) and len(pair) == 2:
                out.extend(_field_diff(f"{source}.{name}", pair[0], pair[1], limit))
            else:
                out.append(f"{source}.{name}: {as_text(pair)}")
    return [safe(line) for line in out]


# ── results ──────────────────────────────────────────────────────────────────────────────────


def result_head(result: JSON) -> str:
    """`ok · exit 0 · 13 ms`, `failed · exit 1`, `error: …`: an action's outcome in words."""
    if result.get("error"):
        return f"error: {as_text(result['error'])}"
    parts = ["ok" if result.get("ok", True) else "failed"]
    if result.get("timed_out"):
        parts.append("timed out")
    for key, value in result.items():
        if key in _NOISE or value is None:
            continue
        if key == "exit_code":
            parts.append(f"exit {value}")
        elif key == "duration_ms" and isinstance(value, int | float):
            parts.append(f"{value:.0f} ms")
        elif key == "item_id":
            parts.append(f"inbox item {value}")
        else:
            parts.append(f"{key} {as_text(value)}")
    if result.get("truncated"):
        parts.append("output truncated")
    return " · ".join(parts)


def outputs(result: JSON, limit: int | None) -> Iterator[str]:
    for stream in ("stdout", "stderr"):
        text = result.get(stream)
        if not isinstance(text, str) or not text.strip():
            continue
        lines = text.rstrip("\n").split("\n")
        shown = lines if limit is None else lines[:limit]
        yield f"{stream}:"
        yield from (f"  {safe(line)}" for line in shown)
        if len(lines) > len(shown):
            yield f"  … {len(lines) - len(shown)} more lines"
