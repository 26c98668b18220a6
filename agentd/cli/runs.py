"""Runs: `run start` pursues a goal now; `runs list|show|cancel` follow and stop them."""

from __future__ import annotations

from typing import Annotated

import typer

from agentd import daemon, goals, render
from agentd.cli.root import GoalId, JsonFlag, Limit, Opt, RunId, emit, open_store, paths_of, sub_app
from agentd.db import queries as q
from agentd.models import RunStatus, utcnow

run_app = sub_app(help="Start a run of a goal now.")
runs_app = sub_app(help="Runs: list them, show one's step-by-step timeline, cancel one.")


@run_app.command("start")
def run_start(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Start a run of an active goal now; prints the run id.

    Example: agentd run start 1
    """
    with open_store(ctx) as store:
        run = goals.start_run(store, goal_id)
    emit(as_json, run, lambda: str(run.run_id))
    if not as_json:
        typer.echo(f"run {run.run_id} started; follow it: agentd runs show {run.run_id}", err=True)
    if daemon.daemon_pid(paths_of(ctx)) is None:
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
    with open_store(ctx) as store:
        runs = store.read(lambda c: q.list_runs(c, goal_id=goal, status=status, limit=limit))
    emit(as_json, runs, lambda: render.runs_table(runs, utcnow()))


@runs_app.command("show")
def runs_show(ctx: typer.Context, run_id: RunId, as_json: JsonFlag = False) -> None:
    """Show a run's timeline: each step's action, verdict (and rule), result and tokens.

    Table cells are cut to one line; --json carries every value in full.
    """
    with open_store(ctx) as store:
        run, goal, steps = goals.run_details(store, run_id)
    data = {**render.jsonable(run), "goal": goal, "spend": render.run_spend(steps), "steps": steps}
    now = utcnow()
    emit(
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
    with open_store(ctx) as store:
        goals.cancel_run(store, run_id, reason)
    typer.echo(f"run {run_id} cancelled")
