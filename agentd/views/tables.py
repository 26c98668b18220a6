"""Plain aligned tables and `label:  value` field lists: the layout of every CLI view.

A table fits the terminal: when its rows are wider than `terminal_width()` the free-text columns
(those given a cap in `widths`) give up room, the widest first, down to their floor, and their cells
are cut with …. When even that is too wide, the columns named in `drop` go, one at a time, before
any column is cut below its floor: a column the reader needs whole is dropped, never made useless.
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
    *,
    floors: dict[str, int] | None = None,
    drop: Sequence[str] = (),
) -> str:
    """Plain aligned columns; `widths` caps a column (by header) so rows stay on one line, and
    the capped columns shrink until a row fits `width` (-1: the terminal's; None: no limit).

    `floors` says how narrow a capped column may get (default `MIN_FREE`); the columns in `drop`
    are left out, in that order, while the table cannot fit with every capped column at its floor.
    When nothing is left to drop, the capped columns go below their floors down to `MIN_FREE`."""
    if not rows:
        return empty
    if width == -1:
        width = terminal_width()
    floors = floors or {}
    shown = list(range(len(headers)))
    if width is not None:
        for name in drop:
            if _fits(headers, rows, widths, floors, shown, width):
                break
            shown = [i for i in shown if str(headers[i]) != name]
    heads = [headers[i] for i in shown]
    cells_in = [[r[i] for i in shown] for r in rows]
    caps = [widths.get(str(h), 80) for h in heads]
    cells = [[one_line(v, cap) for v, cap in zip(r, caps, strict=True)] for r in cells_in]
    sizes = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    free = [i for i, h in enumerate(heads) if str(h) in widths]
    if width is not None:
        least = [max(floors.get(str(h), MIN_FREE), len(str(h))) for h in heads]
        changed = _shrink(sizes, free, least, width)
        # Nothing left to drop and still too wide: below the floors, as a last resort.
        changed |= _shrink(sizes, free, [max(MIN_FREE, len(str(h))) for h in heads], width)
        if changed:
            cells = [[one_line(v, n) for v, n in zip(r, sizes, strict=True)] for r in cells_in]
    lines = [[str(h).upper() for h in heads], *cells]
    return "\n".join(
        "  ".join(c.ljust(n) for c, n in zip(r, sizes, strict=True)).rstrip() for r in lines
    )


def _fits(
    headers: Row,
    rows: Sequence[Row],
    widths: dict[str, int],
    floors: dict[str, int],
    shown: list[int],
    width: int,
) -> bool:
    """Whether the `shown` columns fit `width` with every capped column at most at its floor."""
    total = 2 * (len(shown) - 1)
    for i in shown:
        name = str(headers[i])
        size = max([len(name)] + [len(one_line(r[i], widths.get(name, 80))) for r in rows])
        if name in widths:
            size = min(size, max(floors.get(name, MIN_FREE), len(name)))
        total += size
    return total <= width


def _shrink(sizes: list[int], free: list[int], least: list[int], width: int) -> bool:
    """Narrow the widest free column, one character at a time and none below its `least`,
    until the row fits; True when any column changed."""
    changed = False
    while sum(sizes) + 2 * (len(sizes) - 1) > width:
        room = [i for i in free if sizes[i] > least[i]]
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
