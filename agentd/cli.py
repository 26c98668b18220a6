"""The `agentd` command line: parse → call one function → render (a table, or --json).

Typer has no coroutine support, so async work runs under `asyncio.run` here, at the edge. Expected
errors (any AgentdError) print `agentd: <message>` on stderr and exit with the error's code — 1 for
not found / refused / unusable state, 2 for a bad command line or config — never with a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import importlib
import importlib.resources
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from agentd import config, daemon, doctor, goals, inbox, log, render
from agentd.config import Paths, ScriptedModel
from agentd.db import accounting
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import AgentdError, Refused, StateError
from agentd.models import GoalStatus, RunStatus, utcnow


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
_typer = functools.partial(
    typer.Typer, no_args_is_help=True, rich_markup_mode=None, add_completion=False
)


app = _typer(
    help="""agentd runs background agents: give it a goal and it keeps working toward it.

    \b
    Start here:
      agentd init                      write config.toml, replies.json and the database
      agentd serve                     run the daemon (leave it running)
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens"
      agentd run start 1               pursue goal 1 now
      agentd inbox list                what the agents need from you
      agentd runs show 1               what run 1 did, step by step
    """,
    cls=_Group,
    pretty_exceptions_enable=False,
)
goal_app = _typer(help="Goals: what you want done and why (add, list, show, pause, resume, close).")
run_app = _typer(help="Start a run of a goal now.")
runs_app = _typer(help="Runs: list them, show one's step-by-step timeline, cancel one.")
inbox_app = _typer(help="The operator inbox: questions, approvals and notices from the agents.")
event_app = _typer(help="Events: tell agentd something happened (starts or wakes runs).")
for _name, _sub in dict(goal=goal_app, run=run_app, runs=runs_app, inbox=inbox_app).items():
    app.add_typer(_sub, name=_name)
app.add_typer(event_app, name="event")

Opt = typer.Option
JsonFlag = Annotated[bool, Opt("--json", help="Machine output on stdout (times: ISO 8601, UTC).")]
GoalId = Annotated[int, typer.Argument(metavar="GOAL_ID", help="A goal id (`agentd goal list`).")]
RunId = Annotated[int, typer.Argument(metavar="RUN_ID", help="A run id (`agentd runs list`).")]
ItemId = Annotated[int, typer.Argument(metavar="ID", help="An item id (`agentd inbox list`).")]
Limit = Annotated[int, Opt("--limit", min=1, help="At most this many, newest first.")]


def main() -> None:
    """The console script `agentd`."""
    app(prog_name="agentd")


@app.callback()
def _root(
    ctx: typer.Context,
    home: Annotated[Path | None, Opt(metavar="PATH", help=render.HOME_HELP)] = None,
) -> None:
    ctx.obj = Paths((home or config.default_home()).expanduser())


# ── edge helpers ─────────────────────────────────────────────────────────────────────────────
def _paths(ctx: typer.Context) -> Paths:
    paths = ctx.obj
    assert isinstance(paths, Paths), "the root callback sets ctx.obj"
    return paths


@contextlib.contextmanager
def _store(ctx: typer.Context) -> Iterator[SyncStore]:
    """The home's database, migrated; never created here (that is `agentd init`)."""
    paths = _paths(ctx)
    if not paths.db.exists():
        raise StateError(f"{paths.db}: no database here; run `agentd --home {paths.home} init`")
    store = SyncStore(paths.db)
    try:
        yield store
    finally:
        store.close()


def _emit(as_json: bool, data: Any, text: Callable[[], str]) -> None:
    """--json (escaped by JSON), or the text view; views neutralise what models and the world
    wrote field by field, and `screen` catches any control character one of them missed."""
    typer.echo(render.to_json(data) if as_json else render.screen(text()))


def _resume_note(ctx: typer.Context, run_id: int | None) -> str:
    if run_id is None:
        return ""
    if daemon.daemon_pid(_paths(ctx)) is None:
        return f"; run {run_id} continues when `agentd serve` runs"
    return f"; run {run_id} continues within a second"


# ── init, serve, demo ────────────────────────────────────────────────────────────────────────
def _template() -> str:
    resource = importlib.resources.files("agentd") / "config.example.toml"
    return resource.read_text() if resource.is_file() else render.FALLBACK_CONFIG


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read or change (0600), also when it already existed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def _write_home(paths: Paths) -> list[Path]:
    """Write config.toml, a placeholder replies file and a migrated database; returns what is new.

    Only the owner may read what agentd creates here (the database keeps observations, answers and
    raw model replies): a new home is 0700, its files 0600 (the store creates the database so).
    """
    try:
        paths.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_private(paths.config, _template())
    except OSError as e:
        raise StateError(f"{paths.home}: cannot create the home: {e.strerror or e}") from None
    created = [paths.config]
    for model in config.load(paths.config).models.values():
        if not isinstance(model, ScriptedModel) or model.replies.exists():
            continue
        if model.replies.parent == paths.home:
            _write_private(model.replies, render.PLACEHOLDER_REPLIES)
            created.append(model.replies)
    existed = paths.db.exists()
    SyncStore(paths.db).close()
    return created if existed else [*created, paths.db]


@app.command("init")
def init_cmd(
    ctx: typer.Context,
    force: Annotated[bool, Opt("--force", help="Overwrite an existing config.toml.")] = False,
) -> None:
    """Create a home: config.toml, a placeholder replies.json and the database.

    The database and an existing replies file are kept, even with --force.

    Example: agentd --home ~/agentd-try init
    """
    paths = _paths(ctx)
    if paths.config.exists() and not force:
        raise Refused(f"{paths.config} already exists; keep it, or replace it with `init --force`")
    for path in _write_home(paths):
        typer.echo(render.screen(f"created {path}"))
    if paths.home.stat().st_mode & 0o077:  # an existing home: its mode is the operator's choice
        typer.echo(
            f"note: other users may open {paths.home}, which holds what the agents saw and were "
            f"told; `chmod 700 {paths.home}` makes it private",
            err=True,
        )
    prefix = "agentd" if paths.home == config.default_home() else f"agentd --home {paths.home}"
    typer.echo(f"next: edit {paths.config}, check it with `{prefix} doctor`, then `{prefix} serve`")


@app.command("serve")
def serve_cmd(ctx: typer.Context) -> None:
    """Run the daemon in the foreground until SIGTERM or Ctrl-C.

    Example (a systemd unit runs the same): agentd --home /var/lib/agentd serve
    """
    paths = _paths(ctx)
    cfg = config.load(paths.config)
    log.configure(cfg.daemon.log_level)
    raise typer.Exit(asyncio.run(daemon.serve(paths, cfg)))


# ── demo: agentd/demo.py provides main(home, yes, recover) -> exit code ──────────────────────
@app.command("demo")
def demo_cmd(
    yes: Annotated[bool, Opt("--yes", help="Approve through the inbox automatically.")] = False,
    recover: Annotated[
        bool, Opt("--recover", help="The service heals while the approval waits: it is withdrawn.")
    ] = False,
    home: Annotated[Path | None, Opt(metavar="PATH", help="Use this home, not a temp dir.")] = None,
) -> None:
    """Watch a background agent keep a real service healthy, in a throw-away home.

    A demo checkout service gets a bad deploy; the agent notices, investigates, and asks you to
    approve a rollback. Example: agentd demo --yes   (or: agentd demo --recover)
    """
    try:
        demo = importlib.import_module("agentd.demo")  # lazily: the demo is optional
    except ModuleNotFoundError as e:
        if e.name != "agentd.demo":
            raise
        raise StateError("the demo is not part of this build") from None
    raise typer.Exit(int(demo.main(home, yes, recover)))


@app.command("usage")
def usage_cmd(
    ctx: typer.Context,
    days: Annotated[int, Opt(min=1, help="How many UTC days back, today included.")] = 30,
    as_json: JsonFlag = False,
) -> None:
    """Model calls, tokens and cost by goal, model and day.

    Costs come from [prices] in config.toml. Example: agentd usage --days 7 --json
    """
    since = time.time() - days * 86400
    with _store(ctx) as store:
        rows = store.read(lambda c: accounting.usage(c, since))
    _emit(as_json, rows, lambda: render.usage_table(rows))


# ── goals ────────────────────────────────────────────────────────────────────────────────────
@goal_app.command("add")
def goal_add(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(metavar="TITLE", help="What you want done, in a line.")],
    why: Annotated[str, Opt("--why", metavar="TEXT", help="Why it matters; the agent reads this.")],
    agent: Annotated[str | None, Opt(metavar="NAME", help="An agent in config.toml.")] = None,
    criterion: Annotated[
        list[str] | None, Opt(metavar="TEXT", help="A success criterion (repeatable).")
    ] = None,
    deadline: Annotated[str | None, Opt(metavar="WHEN", help="2026-03-01T17:00, 3d, 12h…")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a goal; prints its id.

    \b
    Example:
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens" \\
        --criterion "p95 latency under 300 ms" --deadline 7d
    """
    when = render.parse_when(deadline, utcnow()) if deadline else None
    paths = _paths(ctx)
    name = render.pick_agent(config.load(paths.config), agent, paths.config)
    with _store(ctx) as store:
        goal = goals.add(
            store, title=title, why=why, agent=name, criteria=criterion or [], deadline=when
        )
    _emit(as_json, goal, lambda: str(goal.goal_id))
    if not as_json:
        hint = f"added for agent {name}; start it with `agentd run start {goal.goal_id}`"
        typer.echo(f"goal {goal.goal_id} {hint}", err=True)


@goal_app.command("list")
def goal_list(
    ctx: typer.Context,
    status: Annotated[GoalStatus | None, Opt(help="Only goals with this status.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List goals, oldest first."""
    with _store(ctx) as store:
        found = store.read(lambda c: q.list_goals(c, status))
    _emit(as_json, found, lambda: render.goals_table(found, utcnow()))


@goal_app.command("show")
def goal_show(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Show a goal, its runs and what it has spent (model tokens)."""
    with _store(ctx) as store:
        goal, runs, spend = goals.details(store, goal_id)
    data = {**render.jsonable(goal), "runs": runs, "spend": spend}
    _emit(as_json, data, lambda: render.goal_view(goal, runs, spend, utcnow()))


def _move_goal(ctx: typer.Context, goal_id: int, status: GoalStatus) -> None:
    with _store(ctx) as store:
        goals.set_status(store, goal_id, status)


@goal_app.command("pause")
def goal_pause(ctx: typer.Context, goal_id: GoalId) -> None:
    """Pause a goal: no new runs start for it until it is resumed."""
    _move_goal(ctx, goal_id, GoalStatus.PAUSED)
    typer.echo(f"goal {goal_id} paused; `agentd goal resume {goal_id}` picks it up again")


@goal_app.command("resume")
def goal_resume(ctx: typer.Context, goal_id: GoalId) -> None:
    """Resume a paused goal."""
    _move_goal(ctx, goal_id, GoalStatus.ACTIVE)
    typer.echo(f"goal {goal_id} active again")


@goal_app.command("close")
def goal_close(
    ctx: typer.Context,
    goal_id: GoalId,
    abandoned: Annotated[
        bool, Opt("--abandoned", help="Close as abandoned, not achieved.")
    ] = False,
) -> None:
    """Close a goal as achieved (or --abandoned) and cancel its active runs."""
    status = GoalStatus.ABANDONED if abandoned else GoalStatus.ACHIEVED
    with _store(ctx) as store:
        cancelled = goals.close(store, goal_id, status)
    extra = f"; cancelled run {', '.join(map(str, cancelled))}" if cancelled else ""
    typer.echo(f"goal {goal_id} closed as {status}{extra}")


# ── runs ─────────────────────────────────────────────────────────────────────────────────────
@run_app.command("start")
def run_start(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Start a run of an active goal now; prints the run id.

    Example: agentd run start 1
    """
    with _store(ctx) as store:
        run = goals.start_run(store, goal_id)
    _emit(as_json, run, lambda: str(run.run_id))
    if not as_json:
        typer.echo(f"run {run.run_id} started; follow it: agentd runs show {run.run_id}", err=True)
    if daemon.daemon_pid(_paths(ctx)) is None:
        typer.echo("note: no daemon serves this home; the run starts with `agentd serve`", err=True)


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    goal: Annotated[int | None, Opt(metavar="GOAL_ID", help="Only this goal's runs.")] = None,
    status: Annotated[RunStatus | None, Opt(help="Only runs with this status.")] = None,
    limit: Limit = 50,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first."""
    with _store(ctx) as store:
        runs = store.read(lambda c: q.list_runs(c, goal_id=goal, status=status, limit=limit))
    _emit(as_json, runs, lambda: render.runs_table(runs, utcnow()))


@runs_app.command("show")
def runs_show(ctx: typer.Context, run_id: RunId, as_json: JsonFlag = False) -> None:
    """Show a run's timeline: each step's action, verdict (and rule), result and tokens.

    Table cells are cut to one line; --json carries every value in full.
    """
    with _store(ctx) as store:
        run, goal, steps = goals.run_details(store, run_id)
    data = {**render.jsonable(run), "goal": goal, "spend": render.run_spend(steps), "steps": steps}
    now = utcnow()
    _emit(
        as_json,
        data,
        lambda: f"{render.run_header(run, goal, now, steps)}\n\n{render.timeline(steps)}",
    )


@runs_app.command("cancel")
def runs_cancel(
    ctx: typer.Context,
    run_id: RunId,
    reason: Annotated[
        str, Opt(metavar="TEXT", help="Recorded as the run's summary.")
    ] = "cancelled by the operator",
) -> None:
    """Cancel a running or waiting run (its open questions and approvals are withdrawn)."""
    with _store(ctx) as store:
        goals.cancel_run(store, run_id, reason)
    typer.echo(f"run {run_id} cancelled")


# ── inbox ────────────────────────────────────────────────────────────────────────────────────
@inbox_app.command("list")
def inbox_list(
    ctx: typer.Context,
    show_all: Annotated[bool, Opt("--all", help="Closed items too.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List open inbox items (--all: every item)."""
    with _store(ctx) as store:
        items = store.read(lambda c: qi.list_items(c, status=None if show_all else "open"))
    _emit(as_json, items, lambda: render.items_table(items, utcnow(), with_status=show_all))


@inbox_app.command("show")
def inbox_show(ctx: typer.Context, item_id: ItemId, as_json: JsonFlag = False) -> None:
    """Show an item in full: why it exists, the exact action and arguments, the rule."""
    with _store(ctx) as store:
        item = store.read(lambda c: qi.get_item(c, item_id))
        goal_id = item.goal_id
        goal = None if goal_id is None else store.read(lambda c: q.get_goal(c, goal_id))
    _emit(as_json, item, lambda: render.item_view(item, goal, utcnow()))


@inbox_app.command("answer")
def inbox_answer(
    ctx: typer.Context,
    item_id: ItemId,
    text: Annotated[
        str, typer.Argument(metavar="TEXT", help="Your answer; the run reads it as given.")
    ],
) -> None:
    """Answer a question.

    Example: agentd inbox answer 4 "yes, the 14:00 deploy was mine"
    """
    with _store(ctx) as store:
        item = inbox.answer(store, item_id, text)
    typer.echo(f"answered item {item_id}{_resume_note(ctx, item.run_id)}")


@inbox_app.command("approve")
def inbox_approve(
    ctx: typer.Context,
    item_id: ItemId,
    edit: Annotated[str | None, Opt(metavar="JSON", help="Change arguments first.")] = None,
    note: Annotated[str, Opt(metavar="TEXT", help="A note recorded with the approval.")] = "",
) -> None:
    """Approve the exact action of an approval item (optionally with edited arguments).

    \b
    Examples:
      agentd inbox approve 4
      agentd inbox approve 4 --edit '{"unit": "checkout.service"}' --note "the real unit"
    """
    changes = render.parse_object("--edit", edit) if edit is not None else None
    cfg = config.load(_paths(ctx).config)
    with _store(ctx) as store:
        item = inbox.approve(store, cfg, item_id, changes, note)
    what = render.safe(f"{item.action} {render.compact(item.args or {})}")
    typer.echo(f"approved item {item_id}: {what}{_resume_note(ctx, item.run_id)}")


@inbox_app.command("deny")
def inbox_deny(
    ctx: typer.Context,
    item_id: ItemId,
    reason: Annotated[str, Opt(metavar="TEXT", help="Told to the run.")] = "",
) -> None:
    """Deny an approval item; the run is told (with your reason) and picks another way."""
    with _store(ctx) as store:
        item = inbox.deny(store, item_id, reason)
    typer.echo(f"denied item {item_id}{_resume_note(ctx, item.run_id)}")


@inbox_app.command("dismiss")
def inbox_dismiss(ctx: typer.Context, item_id: ItemId) -> None:
    """Dismiss a notice you have read."""
    with _store(ctx) as store:
        inbox.dismiss(store, item_id)
    typer.echo(f"dismissed item {item_id}")


# ── events ───────────────────────────────────────────────────────────────────────────────────
@event_app.command("send")
def event_send(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The event name agents trigger or wait on.")
    ],
    data: Annotated[str | None, Opt(metavar="JSON", help="Fields (a JSON object).")] = None,
    key: Annotated[str | None, Opt(metavar="DEDUPE", help="Recorded once per key.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record an event; prints its id.

    \b
    Example:
      agentd event send deploy --data '{"service": "checkout"}' --key deploy-1.4.2
    """
    fields = render.parse_object("--data", data) if data is not None else {}

    def work(c: Any) -> Any:
        event_id = qi.add_event(c, name, fields, key, source="cli")
        return None if event_id is None else qi.events_after(c, event_id - 1, 1)[0]

    with _store(ctx) as store:
        event = store.write(work)
    if event is None:
        if as_json:
            typer.echo(render.to_json({"event_id": None, "duplicate": True, "dedupe_key": key}))
        typer.echo("duplicate key, ignored", err=True)
        return
    _emit(as_json, event, lambda: str(event.event_id))


@event_app.command("list")
def event_list(ctx: typer.Context, limit: Limit = 50, as_json: JsonFlag = False) -> None:
    """List recent events, newest first."""
    with _store(ctx) as store:
        events = store.read(lambda c: qi.list_events(c, limit))
    _emit(as_json, events, lambda: render.events_table(events, utcnow()))


# ── doctor ───────────────────────────────────────────────────────────────────────────────────
@app.command("doctor")
def doctor_cmd(
    ctx: typer.Context,
    ping: Annotated[bool, Opt("--ping", help="Also ask each model for a tiny reply.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check the home: config, database, daemon, models and their API keys (never printed).

    Exits 0 when every required check passes; a stopped daemon is only reported.
    Example: agentd doctor --ping
    """
    paths = _paths(ctx)
    report = doctor.examine(paths, daemon.daemon_pid(paths))
    if ping and report.ok:
        pings = asyncio.run(doctor.ping(config.load(paths.config)))
        report = doctor.Report(report.home, report.checks + pings)
    _emit(as_json, report.as_json(), lambda: render.checks_text(report.checks))
    raise typer.Exit(0 if report.ok else 1)
