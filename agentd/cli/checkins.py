"""When goals check in on their own: `goal schedule`, `goal cadence`, `goal snooze`, the
check-in journal, `checkins`, and how their nudges fared, `checkins report`."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from agentd.cli.goals import goal_app
from agentd.cli.root import (
    GoalId,
    JsonFlag,
    Limit,
    Opt,
    app,
    config_of,
    duration,
    emit,
    open_store,
    sub_app,
)
from agentd.errors import UsageError
from agentd.models import JSON
from agentd.operator import schedules as plan
from agentd.outer import cadence, schedule
from agentd.views import outer as render_outer

Misfire = Literal["skip", "once", "all"]

CRON_EXAMPLES = (
    'e.g. --cron "0 9 * * mon-fri" (09:00 on weekdays) or --cron "30 7 1 * *" (07:30 on the 1st)'
)


def _usage(option: str, err: ValueError, example: str) -> UsageError:
    said = str(err)
    # a cron parser message that already shows crontab examples needs no second set
    shown = example == CRON_EXAMPLES and "e.g." in said
    return UsageError(f"{option}: {said}" if shown else f"{option}: {said}; {example}")


def _shown(as_json: bool, out: JSON, note: str = "") -> None:
    emit(as_json, render_outer.as_json(out), lambda: render_outer.outlook_view(out))
    if note and not as_json:
        typer.echo(note, err=True)


@goal_app.command("schedule")
def goal_schedule(
    ctx: typer.Context,
    goal_id: GoalId,
    cron: Annotated[
        str | None, Opt(metavar="EXPR", help='Add a cron schedule: "minute hour dom month dow".')
    ] = None,
    every: Annotated[
        str | None, Opt(metavar="DUR", help="Add an interval schedule: 90s, 4h, 3d, 2w.")
    ] = None,
    tz: Annotated[
        str | None, Opt(metavar="ZONE", help="IANA time zone for --cron [agent's checkin.tz].")
    ] = None,
    misfire: Annotated[
        Misfire | None,
        Opt(
            help="Fires missed while the daemon was down: skip them, run the latest once, or "
            "run all (up to --cap) [agent's checkin.misfire]."
        ),
    ] = None,
    cap: Annotated[
        int | None, Opt(min=1, help="With --misfire all: at most this many catch-ups.")
    ] = None,
    max_late: Annotated[
        str | None,
        Opt("--max-late", metavar="DUR", help="Missed fires older than this are only recorded."),
    ] = None,
    remove: Annotated[
        int | None, Opt(metavar="SCHEDULE_ID", help="Remove this schedule of the goal.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a goal's check-in schedules, or add (--cron | --every) or --remove one.

    Schedules add check-ins on top of the goal's cadence (`agentd goal cadence`). Each fire is
    recorded once; fires missed while the daemon was down follow --misfire, and none is dropped
    without a trace (`agentd checkins` lists them as missed, with the reason).

    \b
    Examples:
      agentd goal schedule 3                                  show
      agentd goal schedule 3 --cron "0 9 * * mon-fri" --tz Europe/Berlin
      agentd goal schedule 3 --every 3d --misfire skip
      agentd goal schedule 3 --every 1d --misfire all --cap 3 --max-late 2d
      agentd goal schedule 3 --remove 7
    """
    adding = cron is not None or every is not None
    if cron is not None and every is not None:
        raise UsageError("give --cron or --every, not both; each schedule is one or the other")
    if not adding and remove is None and any(v is not None for v in (tz, misfire, cap, max_late)):
        raise UsageError(
            "--tz, --misfire, --cap and --max-late shape a new schedule: add --cron or --every, "
            'e.g. agentd goal schedule 3 --cron "0 9 * * mon-fri" --tz Europe/Berlin'
        )
    if adding and remove is not None:
        raise UsageError("add and --remove one at a time")
    cfg = config_of(ctx)
    with open_store(ctx) as store:
        if remove is not None:
            out = plan.remove_schedule(store, cfg, goal_id, remove)
            _shown(as_json, out, f"removed schedule {remove} of goal {goal_id}")
            return
        if not adding:
            _shown(as_json, plan.outlook(store, cfg, goal_id))
            return
        new = _new_schedule(cron, every, tz, misfire, cap, max_late)
        try:
            out = plan.add_schedule(store, cfg, goal_id, new)
        except ValueError as e:
            option = "--cron" if cron is not None else "--tz" if "zone" in str(e) else "--every"
            raise _usage(option, e, CRON_EXAMPLES) from None
    note = f"added schedule {out['schedule_id']} to goal {goal_id}"
    if not out["enabled"]:
        note += "; check-ins are off for its agent (checkin.enabled = false): it fires once on"
    _shown(as_json, out, note)


def _new_schedule(
    cron: str | None,
    every: str | None,
    tz: str | None,
    misfire: str | None,
    cap: int | None,
    max_late: str | None,
) -> plan.NewSchedule:
    if tz is not None:
        try:
            schedule.zone(tz)
        except ValueError as e:
            raise _usage("--tz", e, "see `timedatectl list-timezones`") from None
    late = duration("--max-late", max_late) if max_late is not None else None
    if every is not None:
        seconds = duration("--every", every)
        if seconds < 1:
            raise UsageError(f"--every {every!r}: an interval is at least 1s (e.g. --every 3d)")
        kind, spec = "interval", f"{seconds:g}"
    else:
        assert cron is not None
        try:
            schedule.parse_spec("cron", cron, tz or "UTC")
        except ValueError as e:
            raise _usage("--cron", e, CRON_EXAMPLES) from None
        kind, spec = "cron", cron
    return plan.NewSchedule(kind, spec, tz, misfire, cap, late)


@goal_app.command("cadence")
def goal_cadence(
    ctx: typer.Context,
    goal_id: GoalId,
    every: Annotated[str | None, Opt(metavar="DUR", help="The usual pace: 1d, 3d, 1w…")] = None,
    min_: Annotated[
        str | None, Opt("--min", metavar="DUR", help="Never look again sooner (the model cannot).")
    ] = None,
    max_: Annotated[
        str | None, Opt("--max", metavar="DUR", help="Never stay away longer (backoff stops).")
    ] = None,
    quiet: Annotated[
        str | None,
        Opt(metavar="HH:MM-HH:MM", help='Local quiet hours: no check-in inside ("none": off).'),
    ] = None,
    tz: Annotated[
        str | None, Opt(metavar="ZONE", help="IANA zone of the quiet hours, e.g. Europe/Berlin.")
    ] = None,
    reset: Annotated[
        bool, Opt("--reset", help="Back to the agent's defaults; forget the backoff.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show or change how often a goal checks in (no option: show).

    The model may propose when to look next; agentd clamps it to --min/--max, backs off after
    dismissed or ignored nudges (up to --max), tightens before a deadline, and never checks in
    during quiet hours. Unset values come from the agent's [agents.NAME.checkin].

    \b
    Examples:
      agentd goal cadence 3 --every 3d --min 4h --max 14d
      agentd goal cadence 3 --quiet 22:00-08:00 --tz Europe/Berlin
      agentd goal cadence 3 --quiet none
      agentd goal cadence 3 --reset
    """
    change = plan.CadenceChange(
        every_s=duration("--every", every) if every is not None else None,
        min_s=duration("--min", min_) if min_ is not None else None,
        max_s=duration("--max", max_) if max_ is not None else None,
        quiet=quiet,
        tz=tz,
        reset=reset,
    )
    if quiet is not None:
        try:
            cadence.parse_quiet(quiet)
        except ValueError as e:
            raise _usage("--quiet", e, "e.g. --quiet 22:00-08:00, or --quiet none") from None
    if tz is not None:
        try:
            schedule.zone(tz)
        except ValueError as e:
            raise _usage("--tz", e, "e.g. --tz Europe/Berlin") from None
    cfg = config_of(ctx)
    with open_store(ctx) as store:
        if not change.fields() and not reset:
            _shown(as_json, plan.outlook(store, cfg, goal_id))
            return
        try:
            out = plan.set_cadence(store, cfg, goal_id, change)
        except ValueError as e:
            example = "e.g. agentd goal cadence 3 --every 3d --min 4h --max 14d"
            raise _usage("cadence", e, example) from None
    _shown(as_json, out, f"goal {goal_id}: cadence updated")


# "-1d" is an argument here, not an option: `duration` then says why it is refused.
@goal_app.command("snooze", context_settings={"ignore_unknown_options": True})
def goal_snooze(
    ctx: typer.Context,
    goal_id: GoalId,
    for_: Annotated[
        str, typer.Argument(metavar="DUR", help="How long: 4h, 2d, 1w (0 ends a snooze).")
    ],
    as_json: JsonFlag = False,
) -> None:
    """No check-in of a goal for a while (scheduled fires in between are recorded as missed).

    Example: agentd goal snooze 3 2d
    """
    seconds = duration("the snooze", for_, allow_zero=True)
    cfg = config_of(ctx)
    with open_store(ctx) as store:
        out = plan.snooze(store, cfg, goal_id, seconds)
    tz = (out.get("cadence") or {}).get("tz", "UTC")
    until = render_outer.local(out["snoozed_until"], tz, out["now"]) if seconds else ""
    _shown(as_json, out, f"goal {goal_id} snoozed until {until}" if seconds else "snooze ended")


checkins_app = sub_app(no_args_is_help=False, invoke_without_command=True)
app.add_typer(checkins_app, name="checkins")


@checkins_app.callback(invoke_without_command=True)
def checkins_cmd(
    ctx: typer.Context,
    goal: Annotated[int | None, Opt(metavar="GOAL_ID", help="Only this goal's check-ins.")] = None,
    limit: Limit = 50,
    as_json: JsonFlag = False,
) -> None:
    """The check-in journal, newest first: what each look found, and what came of it.

    A check-in first asks, with no model call, whether anything moved since the last one; most
    end there as `skipped`. `missed` rows are fires the misfire policy did not run (with why).
    `agentd checkins report` says how the nudges fared, per goal.

    \b
    Examples:
      agentd checkins
      agentd checkins --goal 3 --json
      agentd checkins report
    """
    if ctx.invoked_subcommand is not None:
        return
    with open_store(ctx) as store:
        rows = plan.journal(store, goal, limit)
        now = plan.home_now(store)
    emit(as_json, render_outer.as_json(rows), lambda: render_outer.checkins_table(rows, now))


@checkins_app.command("report")
def checkins_report(
    ctx: typer.Context,
    goal: Annotated[int | None, Opt(metavar="GOAL_ID", help="Only this goal.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """How the nudges fared, per goal: the share accepted, dismissed and ignored until they
    lapsed (of those no longer open), the median time to a person's reaction, and what they did
    to the goal's cadence (each dismissed or ignored nudge backs its check-ins off a step).

    A goal whose nudges are mostly dismissed is called out here and in `agentd status`.

    \b
    Examples:
      agentd checkins report
      agentd checkins report --goal 3 --json
    """
    from agentd.operator import nudges
    from agentd.views import nudges as render_nudges

    with open_store(ctx) as store:
        entries = nudges.quality(store, goal)
    emit(as_json, entries, lambda: render_nudges.report_text(entries))
