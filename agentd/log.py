"""structlog set-up: JSON lines when not on a terminal (journald), console on a TTY.

Events are dotted verbs (`step.recorded`) with values in keys; `run_id` / `goal_id` are bound through
contextvars. Tracebacks never include frame locals (they could hold secrets).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from agentd import config

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


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
            structlog.processors.JSONRenderer(),
        ]
    else:
        processors.append(
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            )
        )
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
