"""The `agentd` command line: parse → call one function → render (a table, or --json).
The top surface: may import every layer; heavy ones (the daemon, the SDKs) inside the commands.

One module per command group (root: the app, its options and shared edge helpers; admin: init,
serve, demo, doctor, usage, events; status; goals; runs; inbox; checkins; web), imported only
when its command is asked for (root.COMMANDS). Typer has no coroutine support, so async work runs
under `asyncio.run` at the edge. Expected errors (any AgentdError) print `agentd: <message>` on
stderr and exit with the error's code — 1 for not found / refused / unusable state, 2 for a bad
command line or config — never with a traceback.
"""

from __future__ import annotations

import functools
import os
import select
import stat
import sys

from agentd import log
from agentd.cli.root import app

SIGPIPE_EXIT = 141  # 128 + SIGPIPE: how a shell reports `yes | head`'s writer


def main() -> None:
    """The console script `agentd`. Once a command runs (not for --version or --help), library
    log lines (a model call's debug line under `doctor --ping`) go to stderr at warning and
    above, never into the command's output; `serve` configures its own logging from the config.
    A reader of stdout that goes away (`agentd goal list --json | head`) ends the command as it
    ends other Unix tools: quietly, with status 141 (click says 1, as if the command failed)."""
    try:
        app(prog_name="agentd", obj=functools.partial(log.configure, "warning"))
    except SystemExit as e:
        if e.code == 1 and _reader_gone():
            raise SystemExit(SIGPIPE_EXIT) from None
        raise


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end is closed (Linux and the BSDs report POLLERR
    on its writing end then; poll is asked, nothing is written)."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        watch = select.poll()
        watch.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in watch.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


__all__ = ["app", "main"]
