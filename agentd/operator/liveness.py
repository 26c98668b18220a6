"""Is the home's daemon alive, or does it merely hold the lock? One bounded GET of `/api/daemon` on
its control socket (api.sock): an answer proves its event loop runs; silence past PROBE_TIMEOUT_S
from a stopped process (SIGSTOP, Ctrl-Z), or past BUSY_TIMEOUT_S more from a running one, means
it is stopped or stuck. Without a socket to ask (the daemon is starting,
or could not bind it) the lock alone is all there is to go by: up, liveness unknown."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from agentd.config import Paths

PROBE_TIMEOUT_S = 1.0  # the whole probe (connect, ask, read); a daemon answers in milliseconds
BUSY_TIMEOUT_S = (
    4.0  # asked again, when silent but not stopped: a busy machine is not a dead daemon
)
ANSWER_MAX_BYTES = 65536  # /api/daemon answers about 100 bytes


class Liveness(StrEnum):
    DOWN = "down"  # nobody holds the home's lock
    ANSWERS = "answers"  # it answered on its socket: its loop runs
    SILENT = "silent"  # it holds the lock but did not answer in time: stopped or stuck
    UNASKED = "unasked"  # it holds the lock; no socket to ask (or not ours to open)


@dataclass(frozen=True)
class Daemon:
    """The daemon of a home as the CLI sees it: the lock holder's pid (-1: someone, pid unknown)
    and whether it answered; `served` is its /api/daemon answer ({"pid", "port", "web", …})."""

    pid: int | None
    liveness: Liveness
    sock: Path
    served: dict[str, Any] | None = None
    unasked_why: str = ""  # UNASKED: why the socket could not be asked

    @property
    def silent(self) -> bool:
        return self.liveness == Liveness.SILENT

    def as_json(self) -> dict[str, Any]:
        """`up` and `pid` as ever; `responding` only when the daemon was asked."""
        pid = self.pid if self.pid is not None and self.pid > 0 else None
        out: dict[str, Any] = {"up": self.pid is not None, "pid": pid}
        if self.liveness in (Liveness.ANSWERS, Liveness.SILENT):
            out["responding"] = self.liveness == Liveness.ANSWERS
        return out

    def why_silent(self) -> str:
        """What is wrong with a silent daemon, and what to do."""
        pid = str(self.pid) if self.pid is not None and self.pid > 0 else "PID"
        return (
            f"pid {pid} holds the home but did not answer on {self.sock} in time. "
            f"If it was stopped (Ctrl-Z, SIGSTOP), `kill -CONT {pid}`; "
            f"else see its log (`journalctl -u agentd`) and restart it (`systemctl restart "
            f"agentd`, or `kill {pid}` then `agentd serve`)"
        )

    def resume_note(self, run_id: int | None) -> str:
        """When a run the operator just unblocked goes on, as a `; …` tail of the message."""
        if run_id is None:
            return ""
        if self.pid is None:
            return f"; run {run_id} continues when `agentd serve` runs"
        if self.silent:
            note = f"the daemon is not responding: {self.why_silent()}"
            return f"; run {run_id} continues when the daemon answers again; {note}"
        return f"; run {run_id} continues within a second"


def probe(paths: Paths, pid: int | None, timeout_s: float = PROBE_TIMEOUT_S) -> Daemon:
    """Ask the daemon holding the home's lock (`pid`, None: no one) whether it answers."""
    sock = paths.api_sock
    if pid is None:
        return Daemon(None, Liveness.DOWN, sock)
    if not sock.exists():  # starting (it binds after recovery), or it could not bind
        return Daemon(pid, Liveness.UNASKED, sock, unasked_why=f"{sock} is missing")
    try:
        token = paths.api_token.read_text().strip()
    except (OSError, UnicodeDecodeError):
        token = ""  # still asked: a refusal (401) is an answer too
    try:
        try:
            answer = _ask(sock, token, timeout_s)
        except (TimeoutError, BlockingIOError):
            if pid > 0 and _stopped(pid):
                raise
            answer = _ask(sock, token, BUSY_TIMEOUT_S)  # running but busy (a loaded machine)
    except (TimeoutError, BlockingIOError):  # BlockingIOError: its backlog is full, none accepted
        return Daemon(pid, Liveness.SILENT, sock)
    except OSError as e:  # refused (a stale socket: this daemon never bound it), not ours to open
        why = f"{sock}: {e.strerror or e}"
        return Daemon(pid, Liveness.UNASKED, sock, unasked_why=why)
    if not answer.startswith(b"HTTP/"):
        return Daemon(pid, Liveness.UNASKED, sock, unasked_why=f"{sock} answered no HTTP")
    return Daemon(pid, Liveness.ANSWERS, sock, _served(answer))


def _stopped(pid: int) -> bool:
    """Whether the kernel says `pid` is stopped (SIGSTOP, Ctrl-Z, a debugger): /proc's state T/t."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (or gone): ask again, as for a busy daemon
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def _ask(sock: Path, token: str, timeout_s: float) -> bytes:
    """GET /api/daemon over the unix socket, all within `timeout_s`; the raw answer. A stopped
    daemon's socket still accepts (the kernel queues the connection): only the reading waits.
    TimeoutError when not even a status line arrived in time."""
    deadline = time.monotonic() + timeout_s
    auth = f"Authorization: Bearer {token}\r\n" if token.isprintable() and token else ""
    request = (
        f"GET /api/daemon HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    ).encode()
    got = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(sock))
        s.sendall(request)
        while len(got) < ANSWER_MAX_BYTES:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(ANSWER_MAX_BYTES)
            except TimeoutError:
                if got.startswith(b"HTTP/"):
                    return got  # it answered, slowly: alive
                raise
            if not chunk:
                break
            got += chunk
    return got


def _served(answer: bytes) -> dict[str, Any] | None:
    """The JSON body of a 200 answer, or None (a refusal, an older daemon's 404, a torn body)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    if head.split(b" ", 2)[1:2] != [b"200"]:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
