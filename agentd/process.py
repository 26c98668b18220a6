"""Run an argv without a shell, bounded in time and output.

The child gets its own process group, so a timeout or a cancellation kills everything it started.
Only the tail of each output stream is kept: the end of a command's output is usually what matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

# The environment a child gets when the caller passes none: enough to find common tools, nothing
# of the daemon's own environment (which may hold secrets).
DEFAULT_ENV: Mapping[str, str] = MappingProxyType({"PATH": "/usr/local/bin:/usr/bin:/bin"})

_READ_CHUNK_BYTES = 64 * 1024
# After the group is killed its pipes close at once, unless a descendant escaped into another
# session; this bounds how long we wait for that before giving up on the rest of the output.
_DRAIN_AFTER_KILL_S = 1.0


def _load_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
        return prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it if the daemon dies. A child in its own session
    would otherwise outlive a crashed daemon and race the recovery that verifies its outcome.
    (Resolved before fork; the child only makes one system call.)"""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class Completed:
    """What happened to one child; only `error` is meaningful when it never started."""

    argv: list[str]
    exit_code: int | None  # None when it timed out (we killed it) or never started
    stdout: str
    stderr: str
    truncated: bool  # stdout or stderr lost its beginning
    timed_out: bool
    duration_ms: float
    error: str | None = None

    @classmethod
    def not_started(cls, argv: list[str], error: str, duration_ms: float) -> Completed:
        return cls(argv, None, "", "", False, False, duration_ms, error)


class _Tail:
    """The last `keep_bytes` bytes of a stream; survives cancellation of the task that feeds it."""

    def __init__(self, keep_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self.buf = bytearray()
        self.truncated = False

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_READ_CHUNK_BYTES):
            self.buf += chunk
            if len(self.buf) > self.keep_bytes:
                del self.buf[: len(self.buf) - self.keep_bytes]
                self.truncated = True

    def text(self) -> str:
        data = bytes(self.buf)
        if self.truncated:
            # The cut may land inside a UTF-8 sequence: drop its continuation bytes (at most 3)
            # rather than decode them into replacement characters.
            skip = 0
            while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")


async def run_argv(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    timeout_s: float,
    output_bytes: int,
) -> Completed:
    """Run `argv` to completion or until `timeout_s`, then kill its process group.

    Never raises for the child's failures: a child that cannot start gives `error`. Cancellation
    kills the process group and propagates.
    """
    argv = list(argv)
    started = time.monotonic()
    if not argv:
        return Completed.not_started(argv, "cannot start an empty argv", 0.0)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL byte in argv or env
        return Completed.not_started(argv, _spawn_error(argv, cwd, e), _ms_since(started))

    out, err = _Tail(output_bytes), _Tail(output_bytes)
    tasks: list[asyncio.Task[Any]] = [
        asyncio.create_task(out.drain(proc.stdout)),
        asyncio.create_task(err.drain(proc.stderr)),
        asyncio.create_task(proc.wait()),
    ]
    try:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        # Pending also when the child exited but a descendant still holds a pipe open: the
        # whole group is over time either way.
        timed_out = bool(pending)
        if timed_out:
            _kill_group(proc.pid)
            await _settle(proc, tasks)
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        await _settle(proc, tasks)
        raise
    return Completed(
        argv=argv,
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        truncated=out.truncated or err.truncated,
        timed_out=timed_out,
        duration_ms=_ms_since(started),
    )


def _kill_group(pgid: int) -> None:
    # start_new_session made the child a group leader, so its pid is the group id. The group may
    # already be gone (everyone exited): nothing left to kill.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _settle(proc: asyncio.subprocess.Process, tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Let the reaper and the readers finish after a kill, bounded; abandon what is left."""
    _, pending = await asyncio.wait(tasks, timeout=_DRAIN_AFTER_KILL_S)
    if not pending:
        return
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    # A descendant that left the group (setsid) still holds a pipe open. asyncio has no public way
    # to close the pipes short of the transport; left open, they would leak until collected.
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _spawn_error(argv: list[str], cwd: Path | None, e: OSError | ValueError) -> str:
    if isinstance(e, ValueError):
        return f"cannot start {argv[0]!r}: {e}"
    where = f" in {cwd}" if cwd is not None else ""
    subject = f" ({e.filename})" if e.filename not in (None, argv[0]) else ""
    return f"cannot start {argv[0]!r}{where}: {e.strerror or e}{subject}"


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
