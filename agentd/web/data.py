"""What the pages and the JSON API read and do, over a short-lived store (in a thread): the
operator functions the CLI's commands call (`inbox list|show`, `goal show`, `runs show`, and
agentd/operator/inbox.py for every answer), so the web can do nothing the CLI cannot."""

from __future__ import annotations

from typing import Any

from agentd.config import Config
from agentd.errors import UsageError
from agentd.models import JSON, Goal, InboxItem, Run, Step
from agentd.operator import goals, inbox
from agentd.operator import schedules as plan
from agentd.operator.home import HomeStore
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


def evidence(item: InboxItem) -> list[tuple[str, Any]]:
    """The item's data as (key, value), what explains it first: the world at the time, the
    check that failed, the logs — whatever the run attached."""
    data = dict(item.data)
    first = [(k, data.pop(k)) for k in EVIDENCE_FIRST if k in data]
    return first + sorted(data.items())


def all_goals(store: HomeStore) -> list[Goal]:
    return goals.all_goals(store)


def goal_json(store: HomeStore, cfg: Config, goal_id: int) -> JSON:
    """What `agentd goal show --json` prints: the goal, its runs, spend and next check-in."""
    goal, runs, spend = goals.details(store, goal_id)
    outlook = plan.outlook(store, cfg, goal_id)
    out: JSON = {**jsonable(goal), "runs": jsonable(runs), "spend": spend}
    out["checkin"] = as_json(outlook)
    return out


def goal_outlook(store: HomeStore, cfg: Config, goal_id: int) -> tuple[Goal, list[Run], JSON]:
    goal, runs, _ = goals.details(store, goal_id)
    return goal, runs, plan.outlook(store, cfg, goal_id)


def run_steps(store: HomeStore, run_id: int) -> tuple[Run, Goal, list[Step]]:
    return goals.run_details(store, run_id)


def run_json(store: HomeStore, run_id: int) -> JSON:
    """What `agentd runs show --json` prints."""
    run, goal, steps = goals.run_details(store, run_id)
    return jsonable(show_json(run, goal, steps))  # type: ignore[no-any-return]


def act(store: HomeStore, cfg: Config, item_id: int, verb: str, form: dict[str, str]) -> JSON:
    """Carry out one operator decision through agentd/operator/inbox.py; returns what was done as the
    flash codes of the page shown next (agentd/web/flash.py)."""
    text = form.get("text", "")
    done: JSON = {"item": str(item_id)}
    if verb == "approve":
        item, _ = item_with_goal(store, item_id)
        edit = form_edit.submitted(store, cfg, item, form)
        inbox.approve(store, cfg, item_id, edit, form.get("note", ""))
        return {"done": "approved-edited" if edit else "approved", **done}
    if verb == "deny":
        inbox.deny(store, item_id, text)
        return {"done": "denied", **done}
    if verb == "answer":
        inbox.answer(store, item_id, text)
        return {"done": "answered", **done}
    if verb == "dismiss":
        inbox.dismiss(store, item_id, text, now=plan.home_now(store))
        return {"done": "dismissed", **done}
    if verb == "accept":
        run_id = inbox.accept(store, cfg, item_id, now=plan.home_now(store)).data.get("run_id")
        return (
            {"done": "accepted-run", **done, "run": str(run_id)}
            if run_id
            else {"done": "accepted", **done}
        )
    raise UsageError(f"unknown action {verb!r}")
