"""Goals: `goal add|list|show|pause|resume|close` (`goal schedule|cadence|snooze`: cli/checkins)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated

import typer

from agentd import config
from agentd.cli.root import (
    GoalId,
    JsonFlag,
    Opt,
    app,
    config_of,
    emit,
    open_store,
    paths_of,
    sub_app,
)
from agentd.errors import Unchanged
from agentd.models import GoalStatus, utcnow
from agentd.operator import goals, inbox
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
        str,
        typer.Argument(
            metavar="TITLE",
            help=f"What you want done, in a line (at most {goals.TITLE_MAX_CHARS} characters).",
        ),
    ],
    why: Annotated[
        str,
        Opt(
            "--why",
            metavar="TEXT",
            help=f"Why it matters; the agent reads this (at most {goals.WHY_MAX_CHARS} characters).",
        ),
    ],
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
    as_json: JsonFlag = False,
) -> None:
    """Add a goal; prints its id.

    \b
    Example:
      agentd goal add "Keep checkout healthy" --why "it is where revenue happens" \\
        --criterion "p95 latency under 300 ms" --deadline 7d
    """
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
        hint = f"added for agent {name}; start it with `agentd runs start {goal.goal_id}`"
        typer.echo(f"goal {goal.goal_id} {hint}", err=True)
    if shared:
        typer.echo(screen(f"warning: {shared}"), err=True)


@goal_app.command("list")
def goal_list(
    ctx: typer.Context,
    status: Annotated[GoalStatus | None, Opt(help="Only goals with this status.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List goals, oldest first."""
    with open_store(ctx) as store:
        found = goals.list_goals(store, status)
    emit(as_json, found, lambda: records.goals_table(found, utcnow()))


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
    data = {
        **jsonable(goal), "runs": runs, "spend": spend,
        "checkin": render_outer.as_json(outlook),
    }  # fmt: skip
    emit(
        as_json,
        data,
        lambda: (
            f"{records.goal_view(goal, runs, spend, utcnow())}\n\n"
            f"{render_outer.outlook_view(outlook)}"
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
