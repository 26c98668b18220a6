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

from agentd import log
from agentd.cli.root import app


def main() -> None:
    """The console script `agentd`. Once a command runs (not for --version or --help), library
    log lines (a model call's debug line under `doctor --ping`) go to stderr at warning and
    above, never into the command's output; `serve` configures its own logging from the config."""
    app(prog_name="agentd", obj=functools.partial(log.configure, "warning"))


__all__ = ["app", "main"]
