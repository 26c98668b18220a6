"""Plain aligned tables and `label:  value` field lists: the layout of every CLI view."""

from __future__ import annotations

from collections.abc import Sequence

from agentd.text import one_line, screen

Row = Sequence[object]


def table(headers: Row, rows: Sequence[Row], widths: dict[str, int], empty: str = "") -> str:
    """Plain aligned columns; `widths` caps a column (by header) so rows stay on one line."""
    if not rows:
        return empty
    cells = [
        [one_line(v, widths.get(str(h), 80)) for h, v in zip(headers, r, strict=True)] for r in rows
    ]
    sizes = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [[str(h).upper() for h in headers], *cells]
    return "\n".join(
        "  ".join(c.ljust(n) for c, n in zip(r, sizes, strict=True)).rstrip() for r in lines
    )


def field_lines(pairs: Sequence[tuple[str, object]]) -> str:
    """`label:  value` lines; a multi-line value continues under the value column.

    Values arrive already passed through `safe()` where they hold written text; the newlines left
    are the view's own (a JSON layout, a list), and any control character left is escaped here.
    """
    pad = max(len(k) for k, _ in pairs) + 2
    out = []
    for key, value in pairs:
        lines = screen(str(value)).split("\n")
        out.append(f"{key + ':':<{pad}}{lines[0]}")
        out.extend(" " * pad + line for line in lines[1:])
    return "\n".join(out)
