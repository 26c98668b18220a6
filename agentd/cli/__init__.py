"""The `agentd` command line: parse → call one function → render (a table, or --json).
The top surface: may import every layer; heavy ones (the daemon, the SDKs) inside the commands.

One module per command group (root: the app, its options and shared edge helpers; admin: init,
serve, demo, doctor, usage, events; status; goals; runs; inbox; checkins; web). Typer has no
coroutine support, so async work runs under `asyncio.run` at the edge. Expected errors (any
AgentdError) print `agentd: <message>` on stderr and exit with the error's code — 1 for not
found / refused / unusable state, 2 for a bad command line or config — never with a traceback.
"""

from __future__ import annotations

from agentd import log
from agentd.cli import admin as _admin  # noqa: F401  # registers init, serve, reload, backup, demo, usage, doctor
from agentd.cli import checkins as _checkins  # noqa: F401  # registers `goal schedule` etc.
from agentd.cli import mcp as _mcp  # noqa: F401  # registers `agentd mcp`
from agentd.cli import status as _status  # noqa: F401  # registers `agentd status`
from agentd.cli import web as _web  # noqa: F401  # registers `agentd web`
from agentd.cli.build import artifact_app  # also registers `build`
from agentd.cli.events import event_app
from agentd.cli.goals import goal_app
from agentd.cli.inbox import inbox_app
from agentd.cli.root import app
from agentd.cli.runs import run_app, runs_app

for _name, _sub in dict(
    goal=goal_app,
    runs=runs_app,
    inbox=inbox_app,
    event=event_app,
    artifact=artifact_app,
).items():
    app.add_typer(_sub, name=_name)
app.add_typer(run_app, name="run", hidden=True)  # `run start`: the old spelling, for a release


def main() -> None:
    """The console script `agentd`. Library log lines (a model call's debug line under `doctor
    --ping`) go to stderr at warning and above, never into a command's output; `serve`
    configures its own logging from the config."""
    log.configure("warning")
    app(prog_name="agentd")


__all__ = ["app", "main"]
