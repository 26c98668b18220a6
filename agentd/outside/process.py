"""Run an argv without a shell, bounded in time and output; after a crash, fence what it left.

The child gets its own session and process group, so a timeout or a cancellation kills everything it
started. Only the tail of each output stream is kept: the end of a command's output is usually what
matters.

Fencing. Only the child itself dies with the daemon (PR_SET_PDEATHSIG); what it started (a curl in
a script) may keep running after a crash and finish the side effect while recovery runs the action
again. So each child is recorded at spawn (`on_spawn`: its pgid, which is also its session id, its
start time and the boot id) and `fence` kills, before recovery verifies or re-runs, every live
process that either carries the execution's `AGENTD_IDEMPOTENCY_KEY` in its environment, or is in
the recorded session and started no earlier than the child. The one case not fenced is a process
that both leaves the session (setsid, daemonizing) and drops or changes its environment; under
systemd, the unit's cgroup and KillMode cover it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import os
import resource
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from agentd.models import JSON

# The environment a child gets when the caller passes none: enough to find common tools, nothing
# of the daemon's own environment (which may hold secrets).
DEFAULT_ENV: Mapping[str, str] = MappingProxyType({"PATH": "/usr/local/bin:/usr/bin:/bin"})

_READ_CHUNK_BYTES = 64 * 1024
# After the group is killed its pipes close at once, unless a descendant escaped into another
# session; this bounds how long we wait for that before giving up on the rest of the output.
_DRAIN_AFTER_KILL_S = 1.0
# How long `fence` keeps killing before it reports survivors: SIGKILL takes effect at once, except
# for a process in uninterruptible sleep (a hung NFS read), which no signal can hurry.
_FENCE_BOUND_S = 5.0
_FENCE_POLL_S = 0.05
_KEY_VAR = "AGENTD_IDEMPOTENCY_KEY"


def _load_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
        return prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def guard_memory() -> bool:
    """Make the daemon non-dumpable, as ssh-agent does: processes of the same user (a command
    it runs included) can then no longer read its `/proc/PID/environ` (where API keys given as
    variables stay readable for the process's whole life) or attach to it. Children regain the
    default at exec. Returns whether it took effect (Linux only)."""
    if _PRCTL is None:
        return False
    return _PRCTL(_PR_SET_DUMPABLE, 0) == 0 and _PRCTL(_PR_GET_DUMPABLE) == 0


# The open-file limit children start with: the daemon raises its own soft limit to the hard
# one (agentd/api/openfiles.py) and gives its children back the one it was started with, since
# programs using select() break above 1,024 descriptors. None: the daemon changed nothing.
_CHILD_NOFILE: tuple[int, int] | None = None


def children_start_with(soft: int, hard: int) -> None:
    global _CHILD_NOFILE
    _CHILD_NOFILE = (soft, hard)


def _die_with_parent(parent_pid: int, nofile: tuple[int, int] | None = None) -> None:
    """In the child, before exec: SIGKILL it if the daemon dies, and give it back the daemon's
    original open-file limit. A child in its own session would otherwise outlive a crashed
    daemon and race the recovery that verifies its outcome. (Resolved before fork; the child
    only makes system calls — prlimit64, which the unit's SystemCallFilter allows.)"""
    if nofile is not None:
        with contextlib.suppress(OSError, ValueError):
            resource.prlimit(0, resource.RLIMIT_NOFILE, nofile)
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    # The daemon may have died between fork and prctl: the signal would then never come.
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


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
    on_spawn: Callable[[JSON], Awaitable[None]] | None = None,
    merge_stderr: bool = False,  # stderr into stdout, interleaved as written
    kill_group_at_exit: bool = False,  # kill the group when the child exits, not at the timeout
) -> Completed:
    """Run `argv` to completion or until `timeout_s`, then kill its process group.

    Never raises for the child's failures: a child that cannot start gives `error`. Cancellation
    kills the process group and propagates. `on_spawn` gets the child's spawn record (see
    `fence`) as soon as it runs; if it raises, the group is killed and the error propagates: a
    command must not go on where recovery could not find it.
    """
    argv = list(argv)
    started = time.monotonic()
    if not argv:
        return Completed.not_started(argv, "cannot start an empty argv", 0.0)
    not_before = _ticks_since_boot() - 1
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=functools.partial(_die_with_parent, os.getpid(), _CHILD_NOFILE),
        )
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL byte in argv or env
        return Completed.not_started(argv, _spawn_error(argv, cwd, e), _ms_since(started))

    out, err = _Tail(output_bytes), _Tail(output_bytes)
    # Drain before on_spawn awaits (a journal write): a chatty child must not block on a full pipe.
    tasks: list[asyncio.Task[Any]] = [
        asyncio.create_task(out.drain(proc.stdout)),
        asyncio.create_task(err.drain(proc.stderr)),
        asyncio.create_task(_exited(proc) if kill_group_at_exit else proc.wait()),
    ]
    try:
        if on_spawn is not None:
            await on_spawn(spawn_record(proc.pid, not_before))
        remaining_s = max(0.0, started + timeout_s - time.monotonic())
        awaited = tasks[-1:] if kill_group_at_exit else tasks  # the child's exit alone, or all
        _, pending = await asyncio.wait(awaited, timeout=remaining_s)
        # Pending also when the child exited but a descendant still holds a pipe open: the
        # whole group is over time either way.
        timed_out = bool(pending)
        if timed_out or kill_group_at_exit:
            _kill_group(proc.pid)
            await _settle(proc, tasks)
    except BaseException:  # cancelled, or on_spawn failed: re-raised below
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


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Until the child exits (on 3.11 `proc.wait()` also waits for the pipes descendants hold)."""
    while proc.returncode is None:  # noqa: ASYNC110 - asyncio 3.11 has no event for the exit alone
        await asyncio.sleep(0.02)


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


# ── fencing what a crashed daemon's commands left running ─────────────────────────────────────


@dataclass(frozen=True)
class _Proc:
    """One line of /proc/<pid>/stat, the fields fencing needs."""

    pid: int
    state: str  # Z (zombie) and X (dead) are dead: killed already, only waiting to be reaped
    sid: int
    start: int  # clock ticks since boot

    @property
    def dead(self) -> bool:
        return self.state in ("Z", "X")


def _stat(pid: int) -> _Proc | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone: FileNotFoundError, or ESRCH while it was exiting
        return None
    # comm (field 2) may hold spaces and parentheses: the other fields follow the last ")".
    fields = text.rsplit(")", 1)[1].split()
    return _Proc(pid, state=fields[0], sid=int(fields[3]), start=int(fields[19]))


def _ticks_since_boot() -> int:
    """Now, in the unit and clock of the start time in /proc/<pid>/stat (boot time, USER_HZ)."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // (10**9 // os.sysconf("SC_CLK_TCK"))


@functools.cache
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # not Linux: nothing to fence by session either
        return ""


def spawn_record(pid: int, not_before: int) -> JSON:
    """What recovery needs to find a child's session again: `{"pgid", "start", "boot_id",
    "host"}` (a daemon on another host sharing the database can neither see nor stop it).

    The child leads its own session, so `pgid` is also the session id. `start` is the child's start
    time; when the child is already gone (reaped, its pid maybe reused), `not_before`, taken just
    before the fork — one tick early, as the kernel's start time and CLOCK_BOOTTIME round apart by
    a tick —, is an equally good lower bound for everything the session holds.
    """
    proc = _stat(pid)
    start = proc.start if proc is not None and proc.start >= not_before else not_before
    return {"pgid": pid, "start": start, "boot_id": _boot_id(), "host": socket.gethostname()}


@dataclass(frozen=True)
class _Session:
    sid: int
    start: int

    @classmethod
    def recorded(cls, spawned: JSON | None) -> _Session | None:
        """The recorded session, or None when it cannot hold a live process of ours any more:
        no (or a malformed) record, another boot, or our own session (never fence ourselves)."""
        if not spawned:
            return None
        sid, start = spawned.get("pgid"), spawned.get("start")
        if not isinstance(sid, int) or not isinstance(start, int) or sid <= 1:
            return None
        if spawned.get("boot_id") != _boot_id() or sid == os.getsid(0):
            return None
        return cls(sid, start)

    def reused(self) -> bool:
        """The number belongs to another process now. The kernel hands out no pid still in use as
        a session id, so our whole session died before that process was born."""
        leader = _stat(self.sid)
        return leader is not None and leader.start != self.start

    def holds(self, proc: _Proc) -> bool:
        return proc.sid == self.sid and proc.start >= self.start


def _carries(pid: int, entry: bytes) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read (another user's process): not matched by key
        return False
    return entry in environ.split(b"\0")


def _scan(session: _Session | None, key: str) -> list[_Proc]:
    """Every live process to fence (see `fence`), ourselves excepted."""
    if session is not None and session.reused():
        session = None
    entry = f"{_KEY_VAR}={key}".encode() if key else None
    me, found = os.getpid(), []
    for entry_path in Path("/proc").iterdir():
        if not entry_path.name.isdigit() or int(entry_path.name) == me:
            continue
        proc = _stat(int(entry_path.name))
        if proc is None or proc.dead:
            continue
        if (session is not None and session.holds(proc)) or (
            entry is not None and _carries(proc.pid, entry)
        ):
            found.append(proc)
    return found


def _kill_exact(proc: _Proc) -> bool:
    """SIGKILL `proc` unless its pid now names another process. A pidfd pins the process while
    its start time is checked again, so a pid reused since the scan is never signalled."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfd on this kernel: the recheck below narrows the race to microseconds
        pidfd = -1
    try:
        again = _stat(proc.pid)
        if again is None or again.start != proc.start:
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def elsewhere(spawned: JSON | None) -> str | None:
    """The host a recorded child was started on, when it is not this one: nothing here can see
    or stop it (only its own daemon could, and recovery must not assume it did)."""
    host = (spawned or {}).get("host")
    return str(host) if host and host != socket.gethostname() else None


async def fence(spawned: JSON | None, key: str, *, bound_s: float = _FENCE_BOUND_S) -> JSON:
    """Kill every live process an interrupted execution may have left, before recovery verifies.

    A process is fenced when (a) its environment has the exact entry `AGENTD_IDEMPOTENCY_KEY=key`
    (unique per execution; this finds even processes that left the session, if they kept their
    environment; an empty key matches nothing), or (b) `spawned` is a record of this boot from
    `spawn_record` and the process is in that session and started no earlier than its leader —
    unless the session's number is now a pid of a process started at another time, which
    proves the session dead and the number reused. Scans repeat (a fork between scan and kill is
    caught next time) until none is left or `bound_s` passes. Returns `{"killed": [pids],
    "survivors": [pids still alive at the bound]}`; zombies count as dead.
    """
    session = _Session.recorded(spawned)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    killed: set[int] = set()
    while True:
        # /proc holds every process on the host: scan off the loop.
        live = await asyncio.to_thread(_scan, session, key)
        if not live or loop.time() >= deadline:
            return {"killed": sorted(killed), "survivors": sorted(p.pid for p in live)}
        killed.update(p.pid for p in live if _kill_exact(p))
        await asyncio.sleep(_FENCE_POLL_S)
