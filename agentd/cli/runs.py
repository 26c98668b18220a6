"""Runs: `runs start` pursues a goal now; `runs list|show|cancel` follow and stop them.

`run start` is the old spelling of `runs start`: hidden, it still works for a release and says so.
"""

from __future__ import annotations

import shutil
import time
from typing import Annotated

import typer

from agentd.cli.goals import unchanged_is_a_note
from agentd.cli.paging import WithTotal, emit_page, stream_json
from agentd.cli.root import (
    After,
    GoalId,
    JsonFlag,
    Limit,
    Opt,
    RunId,
    app,
    daemon_pid,
    emit,
    open_store,
    paths_of,
    sub_app,
)
from agentd.errors import NotFound, UsageError
from agentd.models import RunStatus
from agentd.operator import goals, listing
from agentd.operator import home as home_time
from agentd.operator.home import HomeStore
from agentd.text import screen
from agentd.views import records
from agentd.views import runs as render_runs

runs_app = sub_app(
    help="Runs: start one, list them, show one's timeline (or follow it live), cancel one."
)
run_app = sub_app(help="Deprecated: use `agentd runs start`.", hidden=True)
app.add_typer(runs_app, name="runs")
app.add_typer(run_app, name="run", hidden=True)  # `run start`: the old spelling, for a release

FOLLOW_POLL_S = 0.5  # how often `runs show --follow` looks for new steps
FOLLOW_SEQ_W = 7  # the step column while following: `#99-101` fits; longer labels push the line
FALLBACK_WIDTH = 100  # when the width of the terminal is unknown (output is not a terminal)


def _start(ctx: typer.Context, goal_id: int, as_json: bool) -> None:
    with open_store(ctx) as store:
        run = goals.start_run(store, goal_id)
    emit(as_json, run, lambda: str(run.run_id))
    if not as_json:
        typer.echo(
            f"run {run.run_id} started; follow it: agentd runs show {run.run_id} --follow", err=True
        )
    if daemon_pid(paths_of(ctx)) is None:
        typer.echo("note: no daemon serves this home; the run starts with `agentd serve`", err=True)


@runs_app.command("start")
def runs_start(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Start a run of an active goal now; prints the run id.

    Example: agentd runs start 1
    """
    _start(ctx, goal_id, as_json)


@run_app.command("start")
def run_start(ctx: typer.Context, goal_id: GoalId, as_json: JsonFlag = False) -> None:
    """Deprecated spelling of `agentd runs start` (kept for a release)."""
    typer.echo("note: `agentd run start` is deprecated; use `agentd runs start`", err=True)
    _start(ctx, goal_id, as_json)


@runs_app.command("list")
def runs_list(
    ctx: typer.Context,
    goal: Annotated[int | None, Opt(metavar="GOAL_ID", help="Only this goal's runs.")] = None,
    status: Annotated[RunStatus | None, Opt(help="Only runs with this status.")] = None,
    limit: Limit = 50,
    after: After = None,
    with_total: WithTotal = False,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first (--after ID: the page before that run; --json --total:
    {runs, total, next_after}; --json is written as it is read)."""
    if as_json:
        with open_store(ctx) as store:
            rows = listing.run_stream(store, goal, status, after, limit)
            stream_json(rows, "runs", with_total)
        return
    with open_store(ctx) as store:
        page = listing.runs(store, goal, status, after, limit)
        now = home_time.now(store)  # the home's clock, as the runs were stamped
    runs = page.rows
    emit_page(as_json, with_total, page, runs, lambda: records.runs_table(runs, now), "runs")


def terminal_width() -> int:
    return shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: RunId,
    step: Annotated[
        int | None, Opt("--step", metavar="N", min=1, help="Show step N in full (seq #N).")
    ] = None,
    follow: Annotated[
        bool, Opt("--follow", "-f", help="Keep printing steps as they happen, until the run ends.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show a run's timeline: what it saw change, each action once (why, verdict, result),
    its waits and its end. Lines fit the terminal ($COLUMNS); --step N shows one step in full,
    --json every value.

    \b
    Examples:
      agentd runs show 1
      agentd runs show 1 --follow
      agentd runs show 1 --step 5
    """
    if follow and (as_json or step is not None):
        raise UsageError(
            "--follow prints the timeline as it grows; use it without --json and --step"
        )
    with open_store(ctx) as store:
        if follow:
            _follow(store, run_id, terminal_width())
            return
        run, goal, steps = goals.run_details(store, run_id)
        now = home_time.now(store)
    if step is not None:
        one = next((s for s in steps if s.seq == step), None)
        if one is None:
            raise NotFound(f"run {run_id} has no step {step}; its steps are 1 to {len(steps)}")
        emit(as_json, one, lambda: render_runs.step_view(one, now))
        return
    width = terminal_width()
    emit(
        as_json,
        render_runs.show_json(run, goal, steps),
        lambda: (
            f"{render_runs.run_header(run, goal, now, steps, width)}\n\n"
            f"{render_runs.timeline(steps, now, width)}"
        ),
    )


def _follow(store: HomeStore, run_id: int, width: int) -> None:
    """The header, then each entry of the timeline once it is settled, until the run ends."""
    run, goal, steps = goals.run_details(store, run_id)
    header = render_runs.run_header(run, goal, home_time.now(store), steps, width)
    typer.echo(screen(header) + "\n")
    printed, heading = 0, None
    try:
        while True:
            shown = render_runs.entries(steps)
            if not run.status.finished and shown and not shown[-1].settled:
                shown = shown[:-1]  # its check or result is still to come
            lines, heading = render_runs.entries_lines(
                shown[printed:], home_time.now(store), width, FOLLOW_SEQ_W, heading
            )
            if lines:
                typer.echo(screen("\n".join(lines)))
            printed = len(shown)
            if run.status.finished:
                return
            time.sleep(FOLLOW_POLL_S)
            run, _goal, steps = goals.run_details(store, run_id)
    except KeyboardInterrupt:  # Ctrl-C ends following, not the run
        raise typer.Exit(130) from None


@runs_app.command("cancel")
def runs_cancel(
    ctx: typer.Context,
    run_id: RunId,
    reason: Annotated[
        str, Opt(metavar="TEXT", help="Recorded as the run's summary.")
    ] = "cancelled by the operator",
) -> None:
    """Cancel a running or waiting run (its open questions and approvals are withdrawn)."""
    with open_store(ctx) as store, unchanged_is_a_note():
        goals.cancel_run(store, run_id, reason)
    typer.echo(f"run {run_id} cancelled")
