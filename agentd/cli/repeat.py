"""`--watch`: a read command shown again every few seconds until Ctrl-C, as `watch agentd status`
would, without a second tool: on a terminal each frame replaces the last; piped, frames follow
each other (with --json, one document each)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import typer

WATCH_S = 2.0  # between two frames
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen


def repeat(show: Callable[[], None], every_s: float = WATCH_S) -> None:
    """Call `show` (which prints one frame) every `every_s` seconds until Ctrl-C (exit 0)."""
    tty = sys.stdout.isatty()
    try:
        while True:
            if tty:
                typer.echo(CLEAR, nl=False)
            show()
            if tty:
                typer.echo(f"\n(every {every_s:g} s; Ctrl-C stops)")
            sys.stdout.flush()
            time.sleep(every_s)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
