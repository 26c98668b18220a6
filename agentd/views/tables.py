"""Plain aligned tables and `label:  value` field lists: the layout of every CLI view.

A table fits the terminal: when its rows are wider than `terminal_width()` the free-text columns
(those given a cap in `widths`) give up room, the widest first, and their cells are cut with ….
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence

from agentd.text import one_line, screen

Row = Sequence[object]
MIN_FREE = 8  # a free-text column keeps at least this many characters (or its header's)


def terminal_width() -> int | None:
    """The terminal's columns (`COLUMNS` first), or None when output is no terminal."""
    return shutil.get_terminal_size((0, 0)).columns or None


def table(
    headers: Row,
    rows: Sequence[Row],
    widths: dict[str, int],
    empty: str = "",
    width: int | None = -1,
) -> str:
    """Plain aligned columns; `widths` caps a column (by header) so rows stay on one line, and
    the capped columns shrink until a row fits `width` (-1: the terminal's; None: no limit)."""
    if not rows:
        return empty
    if width == -1:
        width = terminal_width()
    caps = [widths.get(str(h), 80) for h in headers]
    cells = [[one_line(v, cap) for v, cap in zip(r, caps, strict=True)] for r in rows]
    sizes = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    free = [i for i, h in enumerate(headers) if str(h) in widths]
    if width is not None and _shrink(sizes, free, headers, width):
        cells = [[one_line(v, n) for v, n in zip(r, sizes, strict=True)] for r in rows]
    lines = [[str(h).upper() for h in headers], *cells]
    return "\n".join(
        "  ".join(c.ljust(n) for c, n in zip(r, sizes, strict=True)).rstrip() for r in lines
    )


def _shrink(sizes: list[int], free: list[int], headers: Row, width: int) -> bool:
    """Narrow the widest free column, one character at a time, until the row fits; True when
    any column changed."""
    changed = False
    while sum(sizes) + 2 * (len(sizes) - 1) > width:
        room = [i for i in free if sizes[i] > max(MIN_FREE, len(str(headers[i])))]
        if not room:
            break
        widest = max(room, key=lambda i: sizes[i])
        sizes[widest] -= 1
        changed = True
    return changed


def field_lines(pairs: Sequence[tuple[str, object]], width: int | None = None) -> str:
    """`label:  value` lines; a multi-line value continues under the value column, and with a
    `width` a line longer than the room left is wrapped there (never cut).

    Values arrive already passed through `safe()` where they hold written text; the newlines left
    are the view's own (a JSON layout, a list), and any control character left is escaped here.
    """
    pad = max(len(k) for k, _ in pairs) + 2
    room = max(width - pad, 20) if width else None
    out = []
    for key, value in pairs:
        lines = screen(str(value)).split("\n")
        if room:
            lines = [
                part
                for line in lines
                for part in ([line] if len(line) <= room else textwrap.wrap(line, room))
            ]
        out.append(f"{key + ':':<{pad}}{lines[0]}")
        out.extend(" " * pad + line for line in lines[1:])
    return "\n".join(out)
