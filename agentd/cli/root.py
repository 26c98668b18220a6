"""The root `agentd` command, its options, and the edge helpers every command group shares: the
home's paths, its database (never created here), `--json` or text output, the error boundary.

`--home` may come anywhere on the line (`agentd runs list --home /var/lib/agentd`): the root
group moves it to the front before click parses, walking the command tree so that an option's
value, a command's own `--home` (`demo --home`) and everything after `--` are left alone. The root
imports a command's module only when that command is asked for (COMMANDS): a tool's start-up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup, TyperOption

import agentd
from agentd import config
from agentd.config import Paths
from agentd.errors import AgentdError, StateError, UsageError
from agentd.text import screen, to_json

try:  # typer's converters without pydantic for plain values (a typer without them: its own)
    from agentd.cli.coerce import quicken
except ImportError:  # pragma: no cover - another typer's internals

    def quicken(params: Iterable[Any]) -> None:
        pass


if TYPE_CHECKING:
    from agentd.config import Config
    from agentd.operator.home import HomeStore

HOME = "--home"

HOME_HELP = (
    "State directory with config.toml and agentd.db; allowed anywhere on the line "
    "[default: $AGENTD_HOME, else $XDG_DATA_HOME/agentd or ~/.local/share/agentd]."
)


def _option(command: Any, arg: str) -> TyperOption | None:
    name = arg.split("=", 1)[0]
    for param in command.params:
        if isinstance(param, TyperOption) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _takes_value(option: TyperOption | None, arg: str) -> int:
    """How many of the next tokens are this option's value (0 for a flag or `--opt=value`)."""
    if option is None or option.is_flag or option.count or "=" in arg:
        return 0
    return max(option.nargs, 1)


def hoist_home(root: TyperGroup, ctx: Any, args: list[str]) -> list[str]:
    """`args` with every root `--home PATH` / `--home=PATH` moved to the front (the last one
    given still wins). Follows the subcommands as click will, so an option's value that reads
    `--home`, a command with its own `--home`, and whatever follows `--` stay where they are."""
    front: list[str] = []
    rest: list[str] = []
    command: Any = root
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        option = _option(command, arg)
        if arg.split("=", 1)[0] == HOME and (command is root or option is None):
            take = 1 if "=" in arg else 2
            if i + take > len(args):
                if getattr(ctx, "resilient_parsing", False):  # completing the PATH: let be
                    rest.extend(args[i:])
                    break
                raise typer.BadParameter("--home needs a PATH, e.g. --home /var/lib/agentd", ctx)
            front.extend(args[i : i + take])
            i += take
            continue
        if option is None and isinstance(command, TyperGroup) and not arg.startswith("-"):
            command = command.get_command(ctx, arg) or command
        take = 1 + _takes_value(option, arg)
        rest.extend(args[i : i + take])
        i += take
    return front + rest


# Every command of `agentd`, in the order `agentd --help` lists them, and the modules of agentd.cli
# that define it. A command line imports only its command's modules (`agentd goal list` neither the
# daemon, nor the web stack, nor an SDK); --help, completion and a mistyped name import them all.
COMMANDS: dict[str, tuple[str, ...]] = {
    "init": ("admin",),
    "serve": ("serving",),
    "stop": ("serving",),
    **dict.fromkeys(("reload", "backup", "demo", "usage", "doctor"), ("admin",)),
    "checkins": ("checkins",),
    "mcp": ("mcp",),
    "status": ("status",),
    "build": ("build",),
    "web": ("web",),
    "goal": ("goals", "checkins"),  # checkins adds `goal schedule|cadence|snooze`
    "runs": ("runs",),
    "inbox": ("inbox",),
    "event": ("events",),
    "hooks": ("hooks",),
    "artifact": ("build",),
    "store": ("store",),  # `store copy`: the home's state into PostgreSQL
    "run": ("runs",),  # hidden: `run start`, the old spelling, for a release
}


# What `agentd --help` says of each command, whole (never cut with …), without importing the
# commands' modules: the root's help costs what `--version` does. A test holds each command's
# own help to start with these words.
SUMMARIES: dict[str, str] = {
    "init": "Create a home: config.toml, replies.json and the database.",
    "serve": "Run the daemon (in the foreground, or --detach).",
    "stop": "Stop the daemon serving this home and wait until it is gone.",
    "reload": "Check config.toml and have the serving daemon reload it.",
    "backup": "Copy the database to PATH, consistent while the daemon runs.",
    "demo": "Watch an agent keep a real service healthy, in a throw-away home.",
    "usage": "Model calls, tokens and cost by goal, model and day.",
    "doctor": "Check what would fail at run time: config, store, models, sources.",
    "hooks": "The inbound webhooks: their URLs, deliveries accepted and refused.",
    "checkins": "The check-in journal: what each look found and what came of it.",
    "mcp": "Serve this home to an MCP client over stdio.",
    "status": "Is the daemon up; runs by state; what waits; next check-ins.",
    "build": "Build an artifact: draft, judge, revise until it passes.",
    "web": "Print the web inbox's login URL.",
    "goal": "Goals: what you want done and why, and when they check in.",
    "runs": "Runs: start, list, show a timeline (or follow it live), cancel.",
    "inbox": "The operator inbox: questions, approvals and notices.",
    "event": "Events: tell agentd something happened (starts or wakes runs).",
    "artifact": "What builds made: every version, with the judge's verdict.",
    "store": "Where the home keeps its state: copy it into PostgreSQL.",
}


class _QuickGroup(TyperGroup):
    """A command group whose options, and those of the command it runs, convert plain values
    without pydantic (agentd/cli/coerce.py): only the commands on the line pay for converters."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # with --help, and the root's completion options
        quicken(params)
        return params

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:  # its --help is made here as its own context would make it
            quicken(command.get_params(ctx))
        return name, command, rest


class _Group(_QuickGroup):
    """The root command: its commands loaded when asked for; `--home` anywhere on the line;
    expected errors become one line on stderr and the error's exit code."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list from SUMMARIES: no command module is imported to print it."""
        rows = [(name, SUMMARIES[name]) for name in self.list_commands(ctx) if name in SUMMARIES]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        modules = [f"agentd.cli.{m}" for m in COMMANDS.get(cmd_name, ())]
        if cmd_name not in self.commands or any(m not in sys.modules for m in modules):
            # A group built while only some of its modules were loaded (`goal` before checkins
            # added `goal schedule`) lacks the rest: load them all and build it again.
            for module in modules:  # each registers its commands on `app`
                importlib.import_module(module)
            built = typer.main.get_command(app)  # typer makes click commands of what is there
            assert isinstance(built, TyperGroup), "the root app has a callback: a group"
            self.commands.update(built.commands)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands and args[0] not in COMMANDS:
            for name in COMMANDS:  # a mistyped name: "Did you mean" chooses among them all
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_home(self, ctx, args))

    def invoke(self, ctx: Any) -> Any:
        if callable(ctx.obj):  # the console script's log set-up (agentd.cli.main)
            ctx.meta[CONSOLE_LOGGING] = ctx.obj
            if "structlog" in sys.modules:  # the command's modules log: before it runs
                console_logging(ctx)
        try:
            return super().invoke(ctx)
        except AgentdError as e:  # its text may quote a model or the world: neutralised
            typer.echo(screen(f"agentd: {e}"), err=True)
            raise typer.Exit(e.exit_code) from None
        except OverflowError as e:  # an id past SQLite's integers: `goal show 99999999999999999999`
            if "SQLite INTEGER" not in str(e):
                raise
            typer.echo(
                "agentd: no such id: that number is larger than any id agentd stores (at most"
                " 9223372036854775807)",
                err=True,
            )
            raise typer.Exit(1) from None
        except OSError as e:  # a file the operator must fix (permissions, a full disk)
            if e.errno == errno.EPIPE:  # `agentd runs list | head`: click exits quietly
                raise
            from agentd.db.sqlite import safety

            typer.echo(screen(f"agentd: {safety.untranslated(e, None)}"), err=True)
            raise typer.Exit(1) from None
        except Exception as e:  # a storage failure that escaped untranslated: said, not traced
            from agentd.db.sqlite import safety

            said = safety.untranslated(e, getattr(ctx.obj, "db", None))
            if said is None:
                raise  # a bug keeps its traceback
            typer.echo(screen(f"agentd: {said}"), err=True)
            raise typer.Exit(1) from None


# Plain click help (no rich boxes): `\b` paragraphs keep the examples' line breaks.
sub_app = functools.partial(
    typer.Typer, no_args_is_help=True, rich_markup_mode=None, add_completion=False, cls=_QuickGroup
)


app = sub_app(
    help="""agentd runs background agents: give it a goal and it keeps working toward it.

    \b
    Start here:
      agentd init                      write config.toml, replies.json and the database
      agentd serve                     run the daemon (leave it running)
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens"
      agentd runs start 1              pursue goal 1 now
      agentd status                    is the daemon up, what runs, what waits for you
      agentd inbox list                what the agents need from you
      agentd runs show 1 --follow      what run 1 does, step by step, as it happens
      agentd goal cadence 1 --every 3d check in on goal 1 every three days
      agentd checkins                  what the check-ins looked at and decided

    \b
    --home PATH may be given anywhere on the line. Times: --json gives ISO 8601 in UTC
    (2026-03-01T17:00:00Z); tables give local time with its zone.
    Shell completion: `agentd --install-completion` (bash, zsh, fish; restart the shell),
    or `agentd --show-completion` to see the script.
    """,
    cls=_Group,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Opt = typer.Option
JsonFlag = Annotated[
    bool, Opt("--json", help="Machine output on stdout (times: ISO 8601 in UTC, with Z).")
]
GoalId = Annotated[int, typer.Argument(metavar="GOAL_ID", help="A goal id (`agentd goal list`).")]
RunId = Annotated[int, typer.Argument(metavar="RUN_ID", help="A run id (`agentd runs list`).")]
ItemId = Annotated[int, typer.Argument(metavar="ID", help="An item id (`agentd inbox list`).")]
MAX_ID = 10**18 - 1  # ids and counts the store's signed 64-bit integer holds (18 digits)
Limit = Annotated[int, Opt("--limit", min=1, max=MAX_ID, help="At most this many, newest first.")]
PageLimit = Annotated[
    int | None, Opt("--limit", min=1, max=MAX_ID, help="At most this many (a page).")
]
After = Annotated[
    int | None,
    Opt(
        "--after",
        metavar="ID",
        min=0,
        max=MAX_ID,
        help="The page after this id (a page's last line names it).",
    ),
]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"agentd {agentd.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    home: Annotated[Path | None, Opt(metavar="PATH", help=HOME_HELP)] = None,
    version: Annotated[
        bool,
        Opt("--version", callback=_print_version, is_eager=True, help="Print the version; exit."),
    ] = False,
) -> None:
    ctx.obj = Paths((home or config.default_home()).expanduser())


CONSOLE_LOGGING = "agentd.console_logging"  # ctx.meta: the console script's log set-up, not run yet


def console_logging(ctx: typer.Context) -> None:
    """Under the console script, library log lines go to stderr from here on (warning and up),
    never into the command's output. The root sets it up before a command whose modules log; a
    command that imports such modules inside itself (doctor, mcp, demo) calls this after. Configuring
    costs importing structlog (and rich): more CPU than typer, for a command that never logs."""
    setup = ctx.meta.pop(CONSOLE_LOGGING, None)
    if setup is not None:
        setup()


def paths_of(ctx: typer.Context) -> Paths:
    paths = ctx.obj
    assert isinstance(paths, Paths), "the root callback sets ctx.obj"
    return paths


@contextlib.contextmanager
def open_store(ctx: typer.Context) -> Iterator[HomeStore]:
    """The home's database, migrated; never created here (that is `agentd init`)."""
    from agentd.config.where import home_store_url
    from agentd.db import safety
    from agentd.operator import home as operator_home

    paths = paths_of(ctx)
    if home_store_url(paths.home) is None:  # a home on PostgreSQL needs no file here
        safety.check_not_lost(paths.db)  # a lost database is said so, not "run init"
        if not paths.db.exists():
            raise StateError(f"{paths.db}: no database here; run `agentd --home {paths.home} init`")
    store = operator_home.open_store(paths.db)
    try:
        yield store
    finally:
        store.close()


def emit(as_json: bool, data: Any, text: Callable[[], str]) -> None:
    """--json (escaped by JSON), or the text view; views neutralise what models and the world
    wrote field by field, and `screen` catches any control character one of them missed."""
    typer.echo(to_json(data) if as_json else screen(text()))


def daemon_pid(paths: Paths) -> int | None:
    """The pid of the daemon serving this home (-1: one does, its pid unknown), or None when none
    holds the lock. The reading side of agentd.daemon.serve.home_lock (an flock on the home
    directory, the pid in agentd.lock), here so that a command asking it never imports the daemon."""
    try:
        fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            pid = paths.lock.read_text().strip()
        except OSError:
            pid = ""
        return int(pid) if pid.isdigit() else -1
    finally:
        os.close(fd)
    return None


def resume_note(ctx: typer.Context, run_id: int | None) -> str:
    if run_id is None:
        return ""
    if daemon_pid(paths_of(ctx)) is None:
        return f"; run {run_id} continues when `agentd serve` runs"
    return f"; run {run_id} continues within a second"


def duration(option: str, text: str, *, allow_zero: bool = False) -> float:
    """A duration typed on the command line ("90s", "4h", "3d", "2w", "1d12h" or seconds)."""
    from agentd.outer import cadence

    eg = f"{option} 3d" if option.startswith("-") else "3d"
    if text.startswith("-") and not text[1:2].isdigit():  # an argument's place: not an option
        raise UsageError(f"no such option: {text} (see --help)")
    if text.strip().startswith("-"):
        raise UsageError(
            f"{option} {text!r} is negative; a duration is how long from now, e.g. {eg}"
            + (" (0 ends it)" if allow_zero else "")
        )
    try:
        seconds = cadence.parse_duration(text)
    except ValueError as e:
        if "too long" in str(e):
            raise UsageError(f"{option}: {e}") from None
        raise UsageError(
            f"{option} {text!r} is not a duration; write a number and a unit: 90s, 45m, 4h, 3d, "
            f"2w or 1d12h (e.g. {option} 3d)"
        ) from None
    if seconds == 0 and not allow_zero:
        raise UsageError(f"{option} {text!r} is zero; it must be longer than that, e.g. {eg}")
    return seconds


def config_of(ctx: typer.Context) -> Config:
    return config.load(paths_of(ctx).config)
