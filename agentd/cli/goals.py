"""Goals: `goal add|list|show|pause|resume|close` (`goal schedule|cadence|snooze`: cli/checkins)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentd import config, goals, render, render_outer
from agentd.cli.root import GoalId, JsonFlag, Opt, config_of, emit, open_store, paths_of, sub_app
from agentd.db import queries as q
from agentd.models import GoalStatus, utcnow
from agentd.outer import plan

goal_app = sub_app(
    help="Goals: what you want done and why (add, list, show, pause, resume, close), and when "
    "they check in on their own (schedule, cadence, snooze)."
)


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
    paths = paths_of(ctx)
    name = render.pick_agent(config.load(paths.config), agent, paths.config)
    with open_store(ctx) as store:
        goal = goals.add(
            store, title=title, why=why, agent=name, criteria=criterion or [], deadline=when
        )
    emit(as_json, goal, lambda: str(goal.goal_id))
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
    with open_store(ctx) as store:
        found = store.read(lambda c: q.list_goals(c, status))
    emit(as_json, found, lambda: render.goals_table(found, utcnow()))


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
        **render.jsonable(goal), "runs": runs, "spend": spend,
        "checkin": render_outer.as_json(outlook),
    }  # fmt: skip
    emit(
        as_json,
        data,
        lambda: (
            f"{render.goal_view(goal, runs, spend, utcnow())}\n\n"
            f"{render_outer.outlook_view(outlook)}"
        ),
    )


def _move_goal(ctx: typer.Context, goal_id: int, status: GoalStatus) -> None:
    with open_store(ctx) as store:
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
    with open_store(ctx) as store:
        cancelled = goals.close(store, goal_id, status)
    extra = f"; cancelled run {', '.join(map(str, cancelled))}" if cancelled else ""
    typer.echo(f"goal {goal_id} closed as {status}{extra}")
