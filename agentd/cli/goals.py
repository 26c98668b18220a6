"""Goals: `goal add|list|show|pause|resume|close` (`goal schedule|cadence|snooze`: cli/checkins)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from agentd import config
from agentd.cli.paging import WithTotal, emit_page, stream_json
from agentd.cli.root import (
    After,
    GoalId,
    JsonFlag,
    Opt,
    PageLimit,
    app,
    config_of,
    emit,
    open_store,
    paths_of,
    sub_app,
)
from agentd.errors import Unchanged, UsageError
from agentd.models import GoalStatus
from agentd.operator import goals, inbox, listing
from agentd.operator import home as home_time
from agentd.operator import schedules as plan
from agentd.operator.home import HomeStore
from agentd.operator.parse import pick_agent
from agentd.text import jsonable, screen, to_json
from agentd.views import outer as render_outer
from agentd.views import records

goal_app = sub_app(
    help="Goals: what you want done and why (add, list, show, pause, resume, close), and when "
    "they check in on their own (schedule, cadence, snooze)."
)
app.add_typer(goal_app, name="goal")


@goal_app.command("add")
def goal_add(
    ctx: typer.Context,
    title: Annotated[
        str | None,
        typer.Argument(
            metavar="TITLE",
            help=f"What you want done, in a line (at most {goals.TITLE_MAX_CHARS} characters).",
            show_default=False,
        ),
    ] = None,
    why: Annotated[
        str | None,
        Opt(
            "--why",
            metavar="TEXT",
            help=f"Why it matters; the agent reads this (at most {goals.WHY_MAX_CHARS} characters)."
            " Required with TITLE.",
        ),
    ] = None,
    agent: Annotated[str | None, Opt(metavar="NAME", help="An agent in config.toml.")] = None,
    criterion: Annotated[
        list[str] | None, Opt(metavar="TEXT", help="A success criterion (repeatable).")
    ] = None,
    deadline: Annotated[
        str | None,
        Opt(
            metavar="WHEN",
            help="When it is due: 2026-03-01, 2026-03-01T17:00 (no zone: your local time; or "
            "add one, e.g. +02:00 or Z), or a delay from now: 3d, 12h. Not in the past.",
        ),
    ] = None,
    from_file: Annotated[
        Path | None,
        Opt(
            "--from",
            metavar="FILE",
            help='Add many goals: a file of JSON lines, one goal each ({"title": …, "why": …, '
            'optional "agent", "criteria": […], "deadline"}); "-" reads stdin. Every line is '
            "checked before any goal is stored.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a goal; prints its id (with --from, one id a line).

    \b
    Examples:
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens" \\
        --criterion "p95 latency under 300 ms" --deadline 7d
      agentd goal add --from goals.jsonl --json      # prints [ids]
    """
    if from_file is not None:
        if title is not None or why is not None or criterion or deadline is not None:
            raise UsageError(
                "--from FILE takes the goals from the file: give no TITLE, --why, --criterion or "
                "--deadline with it (--agent names the agent of lines that name none)"
            )
        _add_from(ctx, from_file, agent, as_json)
        return
    if title is None or why is None:
        raise UsageError(
            'a goal needs a TITLE and --why, e.g. agentd goal add "Keep checkout healthy" --why '
            '"it is where revenue happens" (or many at once: --from FILE)'
        )
    paths = paths_of(ctx)
    cfg = config.load(paths.config)
    name = pick_agent(cfg, agent, paths.config)
    with open_store(ctx) as store:
        now = datetime.fromtimestamp(plan.home_now(store), UTC)  # a test clock, if the home has one
        when = goals.parse_deadline(deadline, now) if deadline is not None else None
        # Named with --agent, sharing is the operator's choice; picked for them, say so.
        shared = None if agent else goals.shared_triggers(store, cfg.agents[name].triggers, name)
        goal = goals.add(
            store, title=title, why=why, agent=name, criteria=criterion or [], deadline=when
        )
    emit(as_json, goal, lambda: str(goal.goal_id))
    if not as_json:
        triggers = cfg.agents[name].triggers
        start = f"`agentd runs start {goal.goal_id}`"
        hint = (
            f"added for agent {name}; its runs start on its triggers ({', '.join(triggers)}), "
            f"or now with {start}"
            if triggers
            else f"added for agent {name}; start it with {start}"
        )
        typer.echo(f"goal {goal.goal_id} {hint}", err=True)
    if shared:
        typer.echo(screen(f"warning: {shared}"), err=True)


_GOAL_KEYS = ("title", "why", "agent", "criteria", "deadline")
MAX_FROM_LINES = 10_000


def _add_from(ctx: typer.Context, path: Path, agent: str | None, as_json: bool) -> None:
    import json

    paths = paths_of(ctx)
    cfg = config.load(paths.config)
    where = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(
            f"--from {where}: cannot read it: {getattr(e, 'strerror', None) or e}"
        ) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark, as some editors on Windows write
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise UsageError(f"--from {where}: no goals in it (one JSON object a line)")
    if len(lines) > MAX_FROM_LINES:
        raise UsageError(f"--from {where}: {len(lines)} goals; at most {MAX_FROM_LINES} at once")
    new: list[goals.NewGoal] = []
    errors: list[str] = []
    with open_store(ctx) as store:
        now = datetime.fromtimestamp(plan.home_now(store), UTC)
        for n, line in lines:
            try:
                new.append(_goal_line(json.loads(line), cfg, agent, paths.config, now))
            except json.JSONDecodeError as e:
                errors.append(f"{where}:{n}: not JSON ({e.msg} at column {e.colno})")
            except UsageError as e:
                errors.append(f"{where}:{n}: {e}")
        if errors:
            more = f"\n… and {len(errors) - 10} more" if len(errors) > 10 else ""
            raise UsageError(
                f"nothing added: {len(errors)} of {len(lines)} lines are not goals\n"
                + "\n".join(errors[:10])
                + more
            )
        added = goals.add_many(store, new)
    ids = [g.goal_id for g in added]
    if as_json:
        typer.echo(json.dumps(ids))
        return
    typer.echo("\n".join(str(i) for i in ids))
    typer.echo(f"added {len(ids)} goals ({ids[0]}–{ids[-1]})", err=True)


def _goal_line(
    obj: object, cfg: config.Config, agent: str | None, cfg_path: Path, now: datetime
) -> goals.NewGoal:
    if not isinstance(obj, dict):
        raise UsageError('a line is one JSON object: {"title": "…", "why": "…"}')
    unknown = sorted(set(obj) - set(_GOAL_KEYS))
    if unknown:
        raise UsageError(f"unknown key {unknown[0]!r}; a goal has: {', '.join(_GOAL_KEYS)}")
    for key in ("title", "why"):
        if not isinstance(obj.get(key), str):
            raise UsageError(f'"{key}" is missing or not a string')
    criteria = obj.get("criteria", [])
    if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
        raise UsageError('"criteria" is a list of strings')
    wanted = obj.get("agent", agent)
    if wanted is not None and not isinstance(wanted, str):
        raise UsageError('"agent" is a string: an agent in config.toml')
    deadline = obj.get("deadline")
    if deadline is not None and not isinstance(deadline, str):
        raise UsageError('"deadline" is a string, e.g. "2026-03-01" or "7d"')
    name = pick_agent(cfg, wanted, cfg_path)
    when = goals.parse_deadline(deadline, now, '"deadline"') if deadline is not None else None
    return goals.checked(obj["title"], obj["why"], name, criteria, when)


@goal_app.command("list")
def goal_list(
    ctx: typer.Context,
    status: Annotated[GoalStatus | None, Opt(help="Only goals with this status.")] = None,
    limit: PageLimit = None,
    after: After = None,
    with_total: WithTotal = False,
    as_json: JsonFlag = False,
) -> None:
    """List goals, oldest first (--limit N --after ID: a page; under it, the total and the
    next page's --after; --json --total: {goals, total, next_after}; --json is written as it is
    read)."""
    if as_json:
        with open_store(ctx) as store:
            stream_json(listing.goal_stream(store, status, after, limit), "goals", with_total)
        return
    with open_store(ctx) as store:
        page = listing.goals(store, status, after, limit)
        now = home_time.now(store)  # the home's clock, as the goals were stamped
    found = page.rows
    emit_page(as_json, with_total, page, found, lambda: records.goals_table(found, now), "goals")


@goal_app.command("show")
def goal_show(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Show a goal: its runs and spend, its next check-in and why, its cadence, schedules and
    what it remembers (answers, outcomes, nudges accepted or dismissed).

    Example: agentd goal show 3 --json
    """
    cfg = config_of(ctx)
    with open_store(ctx) as store:
        goal, runs, spend = goals.details(store, goal_id)
        outlook = plan.outlook(store, cfg, goal_id)
        now = home_time.now(store)
    data = {
        **jsonable(goal), "runs": runs, "spend": spend,
        "checkin": render_outer.as_json(outlook),
    }  # fmt: skip
    emit(
        as_json,
        data,
        lambda: (
            f"{records.goal_view(goal, runs, spend, now)}\n\n{render_outer.outlook_view(outlook)}"
        ),
    )


@contextlib.contextmanager
def unchanged_is_a_note(
    as_json: bool = False, store: HomeStore | None = None, item_id: int | None = None
) -> Iterator[None]:
    """Asking again for a state that already holds succeeds: a note on stderr, exit 0 (with
    --json, the inbox item as it is on stdout, as a first call would have printed it)."""
    try:
        yield
    except Unchanged as e:
        if as_json and store is not None and item_id is not None:
            typer.echo(to_json(inbox.get_item(store, item_id)))
        typer.echo(screen(f"note: {e}"), err=True)
        raise typer.Exit(0) from None


def _move_goal(ctx: typer.Context, goal_id: int, status: GoalStatus) -> None:
    with open_store(ctx) as store, unchanged_is_a_note():
        goals.set_status(store, goal_id, status)


@goal_app.command("pause")
def goal_pause(ctx: typer.Context, goal_id: GoalId) -> None:
    """Pause a goal: no new runs start for it until it is resumed (already paused: a note)."""
    _move_goal(ctx, goal_id, GoalStatus.PAUSED)
    typer.echo(f"goal {goal_id} paused; `agentd goal resume {goal_id}` picks it up again")


@goal_app.command("resume")
def goal_resume(ctx: typer.Context, goal_id: GoalId) -> None:
    """Resume a paused goal (already active: a note)."""
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
    with open_store(ctx) as store, unchanged_is_a_note():
        cancelled = goals.close(store, goal_id, status)
    extra = f"; cancelled run {', '.join(map(str, cancelled))}" if cancelled else ""
    typer.echo(f"goal {goal_id} closed as {status}{extra}")
