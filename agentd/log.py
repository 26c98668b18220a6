"""structlog set-up: JSON lines when not on a terminal (journald), console on a TTY.

Events are dotted verbs (`step.recorded`) with values in keys; `run_id` / `goal_id` are bound through
contextvars. Tracebacks never include frame locals (they could hold secrets). Values often carry text
from a model or the world: the console escapes their control characters and shows their newlines as
`\\n`, so none can move the cursor or forge a log line; JSON lines escape everything but ASCII.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, TextIO

import structlog
from structlog.dev import Column, ColumnFormatter
from structlog.typing import EventDict, ExcInfo, WrappedLogger

from agentd import config, render

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _neutralised(formatter: ColumnFormatter) -> ColumnFormatter:
    """A console column whose `key=value` text has its control characters escaped."""
    return lambda key, value: render.safe(formatter(key, value))


def _traceback(sio: TextIO, exc_info: ExcInfo) -> None:
    """A plain traceback, escaped; its lines after the first marked `│` (messages are world text)."""
    text = io.StringIO()
    structlog.dev.plain_traceback(text, exc_info)
    sio.write(render.safe(text.getvalue(), multiline=True))


def _neutralise_blocks(logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
    """A ready-made `exception` or `stack` text, which the console prints as it is, escaped."""
    for key in ("exception", "stack"):
        if isinstance(event_dict.get(key), str):
            event_dict[key] = render.safe(event_dict[key], multiline=True)
    return event_dict


def _console() -> structlog.dev.ConsoleRenderer:
    renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_traceback)
    renderer.columns = [Column(c.key, _neutralised(c.formatter)) for c in renderer.columns]
    return renderer


def configure(level: str = "info", *, fmt: str | None = None, stream: Any = None) -> None:
    out = stream or sys.stderr
    fmt = fmt or config.log_format() or ("console" if out.isatty() else "json")
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(ensure_ascii=True),  # C1, bidi, DEL as \\uXXXX
        ]
    else:
        processors += [_neutralise_blocks, _console()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
