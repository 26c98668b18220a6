"""The inner loop from the command line: `build` starts one; `artifact list|show|diff` read what
it made — every version with the judge's verdict."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from agentd.cli.root import (
    GoalId,
    JsonFlag,
    Limit,
    Opt,
    app,
    config_of,
    daemon_pid,
    emit,
    open_store,
    paths_of,
    sub_app,
)
from agentd.errors import UsageError
from agentd.inner import spec as build_spec
from agentd.inner.calls import unfit_model
from agentd.inner.start import start
from agentd.operator import artifacts, goals
from agentd.operator import home as home_time
from agentd.views import build as render_build

artifact_app = sub_app(help="What builds made: every version, with the judge's verdict.")
app.add_typer(artifact_app, name="artifact")
ArtifactId = Annotated[
    int, typer.Argument(metavar="ARTIFACT", help="An artifact id (= its build run's id).")
]


def _material(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"--from {path}: {e.strerror or e}") from None
    if len(data) > build_spec.MAX_MATERIAL * 4:
        raise UsageError(
            f"--from {path}: {len(data)} bytes; material is at most "
            f"{build_spec.MAX_MATERIAL} characters"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--from {path}: not UTF-8 text") from None


@app.command("build")
def build_cmd(
    ctx: typer.Context,
    goal_id: GoalId,
    request: Annotated[str, typer.Argument(metavar="REQUEST", help="What to build, in words.")],
    require: Annotated[
        list[str] | None,
        Opt("--require", "-r", metavar="TEXT", help="A requirement the result must meet; repeat."),
    ] = None,
    source: Annotated[
        Path | None,
        Opt("--from", metavar="FILE", help="Material to work from (UTF-8 text, quoted as data)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Build an artifact for a goal: draft it, judge it against the goal, the request and every
    requirement, revise until it passes — or ask you one specific question.

    The judge also checks that the result serves the goal's why. Requirements the model extracts
    from the request and the goal's memory are added and marked with their source; the agent's
    `[agents.X.build]` config adds deterministic checks that always win over the judge.

    \b
    Example:
      agentd build 1 "a one-page résumé for the Acme backend role" \\
          --require "fits on one page" --require "leads with Go experience" --from cv.md
      agentd artifact show 7          the latest version, with the judge's findings
    """
    spec = build_spec.make_spec(request, require or [], _material(source))
    cfg = config_of(ctx)
    with open_store(ctx) as store:
        goal = goals.get_goal(store, goal_id)
        agent = cfg.agents.get(goal.agent)
        if agent is not None:  # (a goal whose agent is gone is refused by the daemon, visibly)
            for name in {agent.build.model or agent.model, agent.build.judge_model}:
                if name is not None and (unfit := unfit_model(cfg, goal.agent, name)):
                    raise UsageError(unfit)
        run = start(store, goal_id, spec)
    emit(as_json, run, lambda: str(run.run_id))
    if not as_json:
        typer.echo(
            f"build {run.run_id} started; follow it: agentd artifact show {run.run_id} "
            f"(or agentd runs show {run.run_id})",
            err=True,
        )
    if daemon_pid(paths_of(ctx)) is None:
        typer.echo(
            "note: no daemon serves this home; the build starts with `agentd serve`", err=True
        )


@artifact_app.command("list")
def artifact_list(
    ctx: typer.Context,
    goal: Annotated[int | None, Opt(metavar="GOAL_ID", help="Only this goal's artifacts.")] = None,
    limit: Limit = 50,
    as_json: JsonFlag = False,
) -> None:
    """List artifacts (one per build), newest first, with the latest verdict."""
    with open_store(ctx) as store:
        rows = artifacts.listed(store, goal, limit)
        now = home_time.now(store)  # the home's clock, as the versions were stamped
    emit(as_json, rows, lambda: render_build.artifacts_table(rows, now))


@artifact_app.command("show")
def artifact_show(
    ctx: typer.Context,
    artifact: ArtifactId,
    version: Annotated[
        int | None, Opt("--version", "-v", help="This version (default: latest).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a version's text with the judge's findings beside it (evidence, fixes, sources).

    Example: agentd artifact show 7 --version 2
    """
    with open_store(ctx) as store:
        run, art, of, request, reqs = artifacts.shown(store, artifact, version)
        now = home_time.now(store)
    width = shutil.get_terminal_size((120, 40)).columns
    if art is None:  # planned (or asking) but no draft yet: say what it is waiting for
        pending = {"artifact": artifact, "versions": 0, "run_status": run.status,
                   "wait": run.wait, "request": request, "requirements": reqs}  # fmt: skip
        emit(as_json, pending, lambda: render_build.pending_view(run, request, reqs, now))
        return
    out = {**art, "versions": of, "request": request, "requirements": reqs}
    emit(as_json, out, lambda: render_build.artifact_view(art, reqs, request, of, now, width))


@artifact_app.command("diff")
def artifact_diff(
    ctx: typer.Context,
    artifact: ArtifactId,
    old: Annotated[
        int | None, typer.Argument(metavar="[FROM]", help="Default: the one before TO.")
    ] = None,
    new: Annotated[int | None, typer.Argument(metavar="[TO]", help="Default: the latest.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """A unified diff between two versions (default: the last revision).

    Example: agentd artifact diff 7 1 3
    """
    with open_store(ctx) as store:
        a, b = artifacts.compared(store, artifact, old, new)
    out = {"artifact": artifact, "from": a["version"], "to": b["version"],
           "diff": render_build.diff_lines(a, b)}  # fmt: skip
    emit(as_json, out, lambda: render_build.diff_view(a, b))


__all__ = ["artifact_app", "build_cmd"]
