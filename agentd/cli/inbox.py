"""The operator inbox: `inbox list|show|answer|approve|deny|dismiss|accept`. What unblocks a run
says when it goes on: within a second, when `agentd serve` runs, or — a daemon that holds the
home but does not answer (one bounded ask on its socket) — when it answers again, and what to do."""

from __future__ import annotations

from typing import Annotated

import typer

from agentd import config
from agentd.cli.goals import unchanged_is_a_note
from agentd.cli.paging import WithTotal, emit_page, stream_json
from agentd.cli.root import (
    After,
    ItemId,
    JsonFlag,
    Opt,
    PageLimit,
    app,
    daemon_pid,
    emit,
    open_store,
    paths_of,
    sub_app,
)
from agentd.operator import evidence, goals, inbox, listing, liveness
from agentd.operator import home as home_time
from agentd.operator import schedules as plan
from agentd.operator.parse import parse_object
from agentd.text import compact, jsonable, safe
from agentd.views import records
from agentd.views.inbox_status import shown_status
from agentd.views.tables import terminal_width

inbox_app = sub_app(help="The operator inbox: questions, approvals and notices from the agents.")
app.add_typer(inbox_app, name="inbox")


def resume_note(ctx: typer.Context, run_id: int | None) -> str:
    """`; run N continues …`, asked of the daemon only when a run waits on what was done."""
    if run_id is None:
        return ""
    paths = paths_of(ctx)
    return liveness.probe(paths, daemon_pid(paths)).resume_note(run_id)


@inbox_app.command("list")
def inbox_list(
    ctx: typer.Context,
    show_all: Annotated[bool, Opt("--all", help="Closed items too (as --status all).")] = False,
    kind: Annotated[
        str | None,
        Opt(
            "--kind", metavar="KIND", help="Only approval, question, notice (nudges too) or nudge."
        ),
    ] = None,
    goal: Annotated[int | None, Opt("--goal", metavar="GOAL_ID", help="Only this goal's.")] = None,
    status: Annotated[
        str | None,
        Opt(
            "--status", metavar="STATUS", help=f"Only: {', '.join(inbox.STATUSES)} [default: open]."
        ),
    ] = None,
    watch: Annotated[
        bool, Opt("--watch", help="Show it again every 2 seconds until Ctrl-C.")
    ] = False,
    limit: PageLimit = None,
    after: After = None,
    with_total: WithTotal = False,
    as_json: JsonFlag = False,
) -> None:
    """List open inbox items (--all: every item; --json --total: {items, total, next_after}),
    narrowed as the web inbox's filters narrow it. An item closed because no one needed it any
    more (the service recovered, its run ended) shows as withdrawn: in --json its `status` stays
    `expired` and `status_shown` says `withdrawn`.

    \b
    Example: agentd inbox list --kind approval --goal 1 --watch
    """
    wanted = inbox.Filter.parse(kind, goal, status or ("all" if show_all else "open"))

    def show() -> None:
        if as_json:  # written as it is read
            with open_store(ctx) as store:
                stream_json(listing.item_stream(store, wanted, after, limit), "items", with_total,
                            lambda i: {**jsonable(i), "status_shown": shown_status(i)})  # fmt: skip
            return
        with open_store(ctx) as store:
            page = listing.items(store, wanted, after, limit)
            now = home_time.now(store)  # the home's clock, as the items were stamped
        items = page.rows
        shown = [{**jsonable(i), "status_shown": shown_status(i)} for i in items]
        emit_page(as_json, with_total, page, shown,
                  lambda: records.items_table(items, now, with_status=wanted.status != "open"),
                  "items")  # fmt: skip

    if watch:
        from agentd.cli.repeat import repeat

        repeat(show)
    else:
        show()


@inbox_app.command("show")
def inbox_show(
    ctx: typer.Context,
    item_id: ItemId,
    world: Annotated[
        bool, Opt("--world", help="Also print the raw world the item was raised in, as JSON.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show an item in full: agentd's evidence summary (each source's state, the last log lines,
    the run's last actions), why the item exists, the exact action and arguments, the rule.
    Lines fit the terminal ($COLUMNS); --world adds the raw world; --json carries everything,
    the summary as `evidence`.
    """
    with open_store(ctx) as store:
        item = inbox.get_item(store, item_id)
        goal_id = item.goal_id
        goal = None if goal_id is None else goals.get_goal(store, goal_id)
        summary = evidence.of_item(store, item)
        now = home_time.now(store)
    shown = {**jsonable(item), "status_shown": shown_status(item), "evidence": summary}
    emit(as_json, shown, lambda: records.item_view(
        item, goal, now, summary, world=world, width=terminal_width()
    ))  # fmt: skip


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
    with open_store(ctx) as store, unchanged_is_a_note():
        item = inbox.answer(store, item_id, text)
    typer.echo(f"answered item {item_id}{resume_note(ctx, item.run_id)}")


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
    if edit is not None:
        inbox.check_text("--edit", edit, required=True)
    changes = parse_object("--edit", edit) if edit is not None else None
    # Only an edit is validated here, against the action's schema; a plain grant is the
    # daemon's to check when the action runs (and loading the config costs the CLI's start).
    cfg = config.load(paths_of(ctx).config) if changes is not None else None
    with open_store(ctx) as store, unchanged_is_a_note():
        item = inbox.approve(store, cfg, item_id, changes, note)
    what = safe(f"{item.action} {compact(item.args or {})}")
    typer.echo(f"approved item {item_id}: {what}{resume_note(ctx, item.run_id)}")


@inbox_app.command("deny")
def inbox_deny(
    ctx: typer.Context,
    item_id: ItemId,
    reason: Annotated[str, Opt(metavar="TEXT", help="Told to the run.")] = "",
) -> None:
    """Deny an approval item; the run is told (with your reason) and picks another way."""
    with open_store(ctx) as store, unchanged_is_a_note():
        item = inbox.deny(store, item_id, reason)
    typer.echo(f"denied item {item_id}{resume_note(ctx, item.run_id)}")


@inbox_app.command("dismiss")
def inbox_dismiss(
    ctx: typer.Context,
    item_id: ItemId,
    reason: Annotated[
        str, Opt(metavar="TEXT", help="Why (for a nudge: remembered by the goal).")
    ] = "",
    as_json: JsonFlag = False,
) -> None:
    """Dismiss a notice you have read. Dismissing a nudge also tells the goal to check in less
    often (its cadence backs off) and remembers why, so the same nudge does not come back.

    Example: agentd inbox dismiss 12 --reason "I already applied there"
    """
    with open_store(ctx) as store, unchanged_is_a_note(as_json, store, item_id):
        item = inbox.dismiss(store, item_id, reason, now=plan.home_now(store))
    note = "; the goal will check in less often" if item.rule == "nudge" else ""
    emit(as_json, item, lambda: f"dismissed item {item_id}{note}")


@inbox_app.command("accept")
def inbox_accept(ctx: typer.Context, item_id: ItemId, as_json: JsonFlag = False) -> None:
    """Accept a check-in's nudge: its suggested action runs as a run of the goal, through the
    harness like any action (policy, approvals and rate limits apply).

    Example: agentd inbox accept 12
    """
    cfg = config.load(paths_of(ctx).config)
    with open_store(ctx) as store, unchanged_is_a_note(as_json, store, item_id):
        item = inbox.accept(store, cfg, item_id, now=plan.home_now(store))
    run_id = item.data.get("run_id")
    if run_id is None:
        emit(as_json, item, lambda: f"accepted item {item_id} (it suggested no action; noted)")
        return
    emit(as_json, item, lambda: (
        f"accepted item {item_id}: run {run_id} carries out the suggestion"
        f"{resume_note(ctx, run_id)}; follow it: agentd runs show {run_id}"
    ))  # fmt: skip
