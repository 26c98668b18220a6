"""The root `agentd` command, its options, and the edge helpers every command group shares: the
home's paths, its database (never created here), `--json` or text output, the error boundary.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from agentd import config, daemon, render
from agentd.config import Config, Paths
from agentd.db.store import SyncStore
from agentd.errors import AgentdError, StateError, UsageError
from agentd.outer import cadence


class _Group(TyperGroup):
    """The root command: turns expected errors into one line on stderr and the error's exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except AgentdError as e:  # its text may quote a model or the world: neutralised
            typer.echo(render.screen(f"agentd: {e}"), err=True)
            raise typer.Exit(e.exit_code) from None
        except OSError as e:  # a file the operator must fix (permissions, a full disk)
            if e.errno == errno.EPIPE:  # `agentd runs list | head`: click exits quietly
                raise
            where = f"{e.filename}: " if e.filename else ""
            typer.echo(render.screen(f"agentd: {where}{e.strerror or e}"), err=True)
            raise typer.Exit(1) from None


# Plain click help (no rich boxes): `\b` paragraphs keep the examples' line breaks.
sub_app = functools.partial(
    typer.Typer, no_args_is_help=True, rich_markup_mode=None, add_completion=False
)


app = sub_app(
    help="""agentd runs background agents: give it a goal and it keeps working toward it.

    \b
    Start here:
      agentd init                      write config.toml, replies.json and the database
      agentd serve                     run the daemon (leave it running)
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens"
      agentd run start 1               pursue goal 1 now
      agentd inbox list                what the agents need from you
      agentd runs show 1               what run 1 did, step by step
      agentd goal cadence 1 --every 3d check in on goal 1 every three days
      agentd checkins                  what the check-ins looked at and decided
    """,
    cls=_Group,
    pretty_exceptions_enable=False,
)

Opt = typer.Option
JsonFlag = Annotated[bool, Opt("--json", help="Machine output on stdout (times: ISO 8601, UTC).")]
GoalId = Annotated[int, typer.Argument(metavar="GOAL_ID", help="A goal id (`agentd goal list`).")]
RunId = Annotated[int, typer.Argument(metavar="RUN_ID", help="A run id (`agentd runs list`).")]
ItemId = Annotated[int, typer.Argument(metavar="ID", help="An item id (`agentd inbox list`).")]
Limit = Annotated[int, Opt("--limit", min=1, help="At most this many, newest first.")]


@app.callback()
def _root(
    ctx: typer.Context,
    home: Annotated[Path | None, Opt(metavar="PATH", help=render.HOME_HELP)] = None,
) -> None:
    ctx.obj = Paths((home or config.default_home()).expanduser())


def paths_of(ctx: typer.Context) -> Paths:
    paths = ctx.obj
    assert isinstance(paths, Paths), "the root callback sets ctx.obj"
    return paths


@contextlib.contextmanager
def open_store(ctx: typer.Context) -> Iterator[SyncStore]:
    """The home's database, migrated; never created here (that is `agentd init`)."""
    paths = paths_of(ctx)
    if not paths.db.exists():
        raise StateError(f"{paths.db}: no database here; run `agentd --home {paths.home} init`")
    store = SyncStore(paths.db)
    try:
        yield store
    finally:
        store.close()


def emit(as_json: bool, data: Any, text: Callable[[], str]) -> None:
    """--json (escaped by JSON), or the text view; views neutralise what models and the world
    wrote field by field, and `screen` catches any control character one of them missed."""
    typer.echo(render.to_json(data) if as_json else render.screen(text()))


def resume_note(ctx: typer.Context, run_id: int | None) -> str:
    if run_id is None:
        return ""
    if daemon.daemon_pid(paths_of(ctx)) is None:
        return f"; run {run_id} continues when `agentd serve` runs"
    return f"; run {run_id} continues within a second"


def duration(option: str, text: str, *, allow_zero: bool = False) -> float:
    """A duration typed on the command line ("90s", "4h", "3d", "2w", "1d12h" or seconds)."""
    try:
        seconds = cadence.parse_duration(text)
    except ValueError as e:
        if "too long" in str(e):
            raise UsageError(f"{option}: {e}") from None
        seconds = -1.0
    if seconds < 0 or (seconds == 0 and not allow_zero) or seconds != seconds:
        raise UsageError(
            f"{option} {text!r} is not a duration; write a number and a unit: 90s, 45m, 4h, 3d, "
            f"2w or 1d12h (e.g. {option} 3d)"
        )
    return seconds


def config_of(ctx: typer.Context) -> Config:
    return config.load(paths_of(ctx).config)
