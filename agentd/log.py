"""structlog set-up: JSON lines when not on a terminal (journald), console on a TTY.

Events are dotted verbs (`step.recorded`) with values in keys; `run_id` / `goal_id` are bound through
contextvars. Tracebacks never include frame locals (they could hold secrets). Values often carry text
from a model or the world: the console escapes their control characters and shows their newlines as
`\\n`, so none can move the cursor or forge a log line; JSON lines escape everything but ASCII.

Under systemd, each JSON line starts with its syslog priority (`<3>` for an error): journald takes
it as the entry's PRIORITY (`SyslogLevelPrefix=` is on by default), so `journalctl -p err` and
alerts on priority work. The same error repeated (a failing database every poll) is logged once
per minute, the next line carrying how many were held back (`repeated=N`) — except the events
their emitter already says once per episode (`EPISODES`): a second outage a minute after the first
is news, however alike its error.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from agentd import config
from agentd.text import safe

# structlog is imported where it is used: importing it imports rich, which costs a command that
# never logs more CPU than typer itself (the console script configures it once a command runs).
if TYPE_CHECKING:
    import structlog
    from structlog.dev import ColumnFormatter
    from structlog.typing import EventDict, ExcInfo, WrappedLogger

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


# syslog priorities, which journald reads from a `<N>` prefix.
PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}


# Said once per episode by their emitter (an outage begun or ended, a fence, a lost listener): never
# held back. The second outage's `db.unreachable` used to be dropped when it quoted the first's
# error within the window, and a daemon in an outage then said nothing at all (issue 31).
EPISODES = frozenset(
    {"db.unreachable", "db.reachable", "listener.lost", "lease.fenced", "lease.resumed"}
)


class Throttle:
    """Drop a warning or error identical to one logged less than `window_s` ago (same level,
    event and `error`); the next one logged after the window says how many were dropped. An
    event of `EPISODES` always passes."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self._clock = clock
        self._seen: dict[str, tuple[float, int]] = {}

    def __call__(self, logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
        level = event_dict.get("level", "")
        if PRIORITY.get(level, 7) > PRIORITY["warning"] or event_dict.get("event") in EPISODES:
            return event_dict
        if "error" in event_dict:
            key = repr((level, event_dict.get("event"), event_dict["error"]))
        else:
            key = repr(sorted(event_dict.items(), key=lambda kv: kv[0]))
        now = self._clock()
        logged_at, dropped = self._seen.get(key, (None, 0))
        if logged_at is not None and now - logged_at < self.window_s:
            import structlog

            self._seen[key] = (logged_at, dropped + 1)
            raise structlog.DropEvent
        if len(self._seen) > 1000:  # forget what has not repeated lately
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window_s}
        self._seen[key] = (now, 0)
        if dropped:
            event_dict["repeated"] = dropped
        return event_dict


class _Prioritised:
    """A renderer whose lines start with their syslog priority, for journald."""

    def __init__(self, renderer: Callable[[WrappedLogger, str, EventDict], Any]) -> None:
        self.renderer = renderer

    def __call__(self, logger: WrappedLogger, name: str, event_dict: EventDict) -> str:
        priority = PRIORITY.get(event_dict.get("level", ""), 6)
        return f"<{priority}>{self.renderer(logger, name, event_dict)}"


def to_journal(stream: Any) -> bool:
    """Whether `stream` is the journal systemd gave us (JOURNAL_STREAM matches its device and
    inode: a child of the service writing to a file inherits the variable, not the stream)."""
    expected = config.journal_stream()
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return expected == (st.st_dev, st.st_ino)


def _neutralised(formatter: ColumnFormatter) -> ColumnFormatter:
    """A console column whose `key=value` text has its control characters escaped."""
    return lambda key, value: safe(formatter(key, value))


def _traceback(sio: TextIO, exc_info: ExcInfo) -> None:
    """A plain traceback, escaped; its lines after the first marked `│` (messages are world text)."""
    import structlog

    text = io.StringIO()
    structlog.dev.plain_traceback(text, exc_info)
    sio.write(safe(text.getvalue(), multiline=True))


def _neutralise_blocks(logger: WrappedLogger, name: str, event_dict: EventDict) -> EventDict:
    """A ready-made `exception` or `stack` text, which the console prints as it is, escaped."""
    for key in ("exception", "stack"):
        if isinstance(event_dict.get(key), str):
            event_dict[key] = safe(event_dict[key], multiline=True)
    return event_dict


def _console() -> structlog.dev.ConsoleRenderer:
    import structlog
    from structlog.dev import Column

    renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_traceback)
    renderer.columns = [Column(c.key, _neutralised(c.formatter)) for c in renderer.columns]
    return renderer


def configure(level: str = "info", *, fmt: str | None = None, stream: Any = None) -> None:
    import structlog

    out = stream or sys.stderr
    fmt = fmt or config.log_format() or ("console" if out.isatty() else "json")
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        Throttle(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        # ensure_ascii: C1, bidi and DEL characters come out as \\uXXXX
        json_lines = structlog.processors.JSONRenderer(ensure_ascii=True)
        processors += [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            _Prioritised(json_lines) if to_journal(out) else json_lines,
        ]
    else:
        processors += [_neutralise_blocks, _console()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    _route_stdlib("apscheduler", _LEVELS[level])


class _ToStructlog(logging.Handler):
    """A library's stdlib log records as structlog lines: the same format, level, journald
    priority and throttle as ours (APScheduler's "job skipped" lines repeat while a lock is held)."""

    def emit(self, record: logging.LogRecord) -> None:
        import structlog

        try:
            structlog.get_logger(record.name).log(record.levelno, record.getMessage())
        except Exception:  # a log line must never break the daemon
            self.handleError(record)


def _route_stdlib(name: str, level: int) -> None:
    lib = logging.getLogger(name)
    lib.handlers = [_ToStructlog()]
    lib.setLevel(max(level, logging.WARNING))  # its info lines (jobs added) are noise here
    lib.propagate = False
