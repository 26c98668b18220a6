"""What the pages and the JSON API read and do, over a short-lived store (in a thread): the
operator functions the CLI's commands call (`inbox list|show`, `goal show`, `runs show`, and
agentd/operator/inbox.py for every answer), so the web can do nothing the CLI cannot."""

from __future__ import annotations

from typing import Any

from agentd.config import Config
from agentd.errors import Refused, Unchanged, UsageError
from agentd.models import JSON, Goal, GoalStatus, InboxItem, InboxKind, Run, Step
from agentd.operator import evidence as operator_evidence
from agentd.operator import goals, inbox, listing
from agentd.operator import schedules as plan
from agentd.operator.home import HomeStore
from agentd.operator.home import now as home_now
from agentd.operator.listing import Page
from agentd.text import jsonable
from agentd.views.outer import as_json
from agentd.views.runs import show_json
from agentd.web import edit as form_edit

# Keys of an item's data shown as its evidence, in this order (the rest follow as they are).
EVIDENCE_FIRST = ("reason", "check", "failed_check", "world", "observed", "logs", "resolved")


def inbox_items(store: HomeStore, *, show_all: bool = False) -> list[InboxItem]:
    return inbox.items(store, show_all=show_all)


def item_with_goal(store: HomeStore, item_id: int) -> tuple[InboxItem, Goal | None]:
    return inbox.item_with_goal(store, item_id)


def inbox_view(store: HomeStore, wanted: inbox.Filter) -> tuple[list[InboxItem], dict[int, Goal]]:
    """The items `wanted` keeps, and their goals by id (for their titles: only theirs, not every
    goal of the home)."""
    kept = inbox.filtered(store, wanted)
    return kept, listing.goals_by_id(store, {i.goal_id for i in kept if i.goal_id is not None})


def inbox_paged(
    store: HomeStore, wanted: inbox.Filter, after: int | None, limit: int
) -> tuple[listing.Around, dict[int, Goal]]:
    """A page of the items `wanted` keeps (oldest first, after item `after`, at most `limit`),
    placed in the list (the pager), and their goals by id — only theirs, for their titles."""
    everything_open = wanted == inbox.Filter()  # then say what waits on other pages
    around = listing.items_around(store, wanted, after, limit, waiting=everything_open)
    goal_ids = {i.goal_id for i in around.page.rows if i.goal_id is not None}
    return around, listing.goals_by_id(store, goal_ids)


def held_line(store: HomeStore) -> str:
    """What quiet hours hold back and which pages will be late, as `agentd status` says it
    ("2 held by quiet hours until 08:00 CET (nudge 9, notice 12)"); "" when nothing is."""
    from agentd.operator import health
    from agentd.views.held import held_summary, late_summary

    channels = health.channel_health(store)
    now = home_now(store)  # the clock the outbox was stamped and held on
    return "; ".join(s for s in (held_summary(channels, now), late_summary(channels, now)) if s)


def item_evidence(store: HomeStore, item: InboxItem) -> JSON | None:
    """agentd's evidence summary of the item, as `inbox show` prints it (None: nothing to show)."""
    return operator_evidence.of_item(store, item)


def evidence(item: InboxItem) -> list[tuple[str, Any]]:
    """The item's data as (key, value), what explains it first: the world at the time, the
    check that failed, the logs — whatever the run attached."""
    data = dict(item.data)
    first = [(k, data.pop(k)) for k in EVIDENCE_FIRST if k in data]
    return first + sorted(data.items())


def all_goals(store: HomeStore) -> list[Goal]:
    return goals.all_goals(store)


def goals_page(store: HomeStore, after: int | None, limit: int | None) -> Page[Goal]:
    return listing.goals(store, None, after, limit)


def inbox_page(
    store: HomeStore, show_all: bool, after: int | None, limit: int | None
) -> Page[InboxItem]:
    return listing.items(store, inbox.Filter(status="all" if show_all else "open"), after, limit)


def goal_json(store: HomeStore, cfg: Config, goal_id: int) -> JSON:
    """What `agentd goal show --json` prints: the goal, its runs, spend and next check-in."""
    goal, runs, spend = goals.details(store, goal_id)
    outlook = plan.outlook(store, cfg, goal_id)
    out: JSON = {**jsonable(goal), "runs": jsonable(runs), "spend": spend}
    out["checkin"] = as_json(outlook)
    return out


def goal_outlook(
    store: HomeStore, cfg: Config, goal_id: int
) -> tuple[Goal, list[Run], JSON, list[InboxItem]]:
    """A goal, its runs (newest first), its check-in outlook and its open inbox items."""
    goal, found, _ = goals.details(store, goal_id)
    found = sorted(found, key=lambda r: r.run_id, reverse=True)
    open_items = [i for i in inbox.items(store) if i.goal_id == goal_id]
    return goal, found, plan.outlook(store, cfg, goal_id), open_items


def run_steps(store: HomeStore, run_id: int) -> tuple[Run, Goal, list[Step]]:
    return goals.run_details(store, run_id)


def run_json(store: HomeStore, run_id: int) -> JSON:
    """What `agentd runs show --json` prints."""
    run, goal, steps = goals.run_details(store, run_id)
    return jsonable(show_json(run, goal, steps))  # type: ignore[no-any-return]


def act(store: HomeStore, cfg: Config, item_id: int, verb: str, form: dict[str, str]) -> JSON:
    """Carry out one operator decision from a page's form; returns what was done as the flash
    codes of the page shown next (agentd/web/flash.py). An approve form's `arg.NAME` fields are
    an edit only where they differ from the proposal (web/edit.py)."""
    edit = None
    if verb == "approve":
        item, _ = item_with_goal(store, item_id)
        edit = form_edit.submitted(store, cfg, item, form)
    text = form.get("note", "") if verb == "approve" else form.get("text", "")
    return decide(store, cfg, item_id, verb, text, edit)[0]


VERBS = ("approve", "deny", "answer", "dismiss", "accept")


def decide(
    store: HomeStore, cfg: Config, item_id: int, verb: str, text: str = "", edit: JSON | None = None
) -> tuple[JSON, InboxItem]:
    """One decision through agentd/operator/inbox.py, as `agentd inbox VERB` makes it: approve
    (with an optional `edit` of the arguments and `text` as its note), deny (`text`: the reason),
    answer (`text`), dismiss (`text`: the reason), accept a nudge. Returns the flash codes of
    what was done and the item as it is now."""
    done: JSON = {"item": str(item_id)}
    if verb == "approve":
        item = inbox.approve(store, cfg, item_id, edit, text, edit_name="the edited arguments")
        return {"done": "approved-edited" if edit else "approved", **done}, item
    if verb == "deny":
        return {"done": "denied", **done}, inbox.deny(store, item_id, text)
    if verb == "answer":
        return {"done": "answered", **done}, inbox.answer(store, item_id, text)
    if verb == "dismiss":
        item = inbox.dismiss(store, item_id, text, now=plan.home_now(store))
        return {"done": "dismissed", **done}, item
    if verb == "accept":
        item = inbox.accept(store, cfg, item_id, now=plan.home_now(store))
        run_id = item.data.get("run_id")
        if run_id:
            return {"done": "accepted-run", **done, "run": str(run_id)}, item
        return {"done": "accepted", **done}, item
    raise UsageError(f"unknown action {verb!r}: one of {', '.join(VERBS)}")


def dismiss_many(store: HomeStore, item_ids: list[int]) -> JSON:
    """Dismiss each open notice of `item_ids` (one transaction each, as `inbox dismiss` does);
    what is no longer open, or is not a notice, is counted and left as it is."""
    now = plan.home_now(store)
    dismissed = skipped = 0
    for item_id in item_ids:
        try:
            if inbox.get_item(store, item_id).kind != InboxKind.NOTICE:
                raise Refused(f"inbox item {item_id} is not a notice")
            inbox.dismiss(store, item_id, "", now=now)
            dismissed += 1
        except (Unchanged, Refused):
            skipped += 1
    code = "dismissed-some" if skipped else "dismissed-many"
    return {"done": code, "count": str(dismissed), "skipped": str(skipped)}


GOAL_VERBS = ("pause", "resume", "checkin", "snooze", "schedule", "unschedule")


def goal_act(store: HomeStore, cfg: Config, goal_id: int, verb: str, form: dict[str, str]) -> JSON:
    """One control of a goal's page, through the use case its `agentd goal …` command calls;
    returns the flash codes of what was done."""
    done: JSON = {"goal": str(goal_id)}
    if verb in ("pause", "resume"):
        status = GoalStatus.PAUSED if verb == "pause" else GoalStatus.ACTIVE
        goals.set_status(store, goal_id, status)
        return {"done": "paused" if verb == "pause" else "resumed", **done}
    if verb == "checkin":
        goals.check_in_now(store, cfg, goal_id)
        return {"done": "checkin", **done}
    if verb == "snooze":
        seconds = _number(form.get("seconds", ""), "seconds")
        plan.snooze(store, cfg, goal_id, seconds)
        return {"done": "snoozed" if seconds else "unsnoozed", **done}
    if verb == "schedule":
        out = plan.add_schedule(store, cfg, goal_id, new_schedule(form))
        return {"done": "scheduled", **done, "schedule": str(out["schedule_id"])}
    if verb == "unschedule":
        schedule_id = int(_number(form.get("schedule_id", ""), "schedule_id"))
        plan.remove_schedule(store, cfg, goal_id, schedule_id)
        return {"done": "unscheduled", **done, "schedule": str(schedule_id)}
    raise UsageError(f"unknown action {verb!r}: one of {', '.join(GOAL_VERBS)}")


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{what} {text[:40]!r} is not a number") from None
    if not 0 <= value < 10**9:
        raise UsageError(f"{what} {text[:40]!r} is out of range")
    return value


def new_schedule(form: dict[str, str]) -> plan.NewSchedule:
    """A schedule from the page's one field: a duration (`30m`, `1d`: an interval) or a crontab
    line (five fields), checked as `agentd goal schedule --every|--cron` checks them."""
    from agentd.outer import cadence, schedule

    spec, tz = form.get("spec", "").strip(), form.get("tz", "").strip() or None
    try:
        if tz is not None:
            schedule.zone(tz)
        if len(spec.split()) == 1:
            seconds = cadence.parse_duration(spec)
            if seconds < 1:
                raise ValueError("an interval is at least 1s (e.g. 30m, 1d)")
            return plan.NewSchedule("interval", f"{seconds:g}", tz)
        schedule.parse_spec("cron", spec, tz or "UTC")
    except ValueError as e:
        raise UsageError(f"schedule {spec[:60]!r}: {e}") from None
    return plan.NewSchedule("cron", spec, tz)
