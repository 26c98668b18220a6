"""What the pages and the JSON API read and do, over a short-lived SyncStore (in a thread): the
same functions the CLI's commands call (`inbox list|show`, `goal show`, `runs show`, and
agentd/inbox.py for every answer), so the web can do nothing the CLI cannot."""

from __future__ import annotations

import json
from typing import Any

from agentd import goals, inbox
from agentd.config import Config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.decide import Menu
from agentd.errors import UsageError
from agentd.models import JSON, Goal, InboxItem, InboxKind, Run, Step
from agentd.outer import plan
from agentd.render import jsonable
from agentd.render_outer import as_json
from agentd.render_runs import show_json

# Keys of an item's data shown as its evidence, in this order (the rest follow as they are).
EVIDENCE_FIRST = ("reason", "check", "failed_check", "world", "observed", "logs", "resolved")


def inbox_items(store: SyncStore, *, show_all: bool = False) -> list[InboxItem]:
    return store.read(lambda c: qi.list_items(c, status=None if show_all else "open"))


def item_with_goal(store: SyncStore, item_id: int) -> tuple[InboxItem, Goal | None]:
    def read(c: Any) -> tuple[InboxItem, Goal | None]:
        item = qi.get_item(c, item_id)
        return item, None if item.goal_id is None else q.get_goal(c, item.goal_id)

    return store.read(read)


def evidence(item: InboxItem) -> list[tuple[str, Any]]:
    """The item's data as (key, value), what explains it first: the world at the time, the
    check that failed, the logs — whatever the run attached."""
    data = dict(item.data)
    first = [(k, data.pop(k)) for k in EVIDENCE_FIRST if k in data]
    return first + sorted(data.items())


def all_goals(store: SyncStore) -> list[Goal]:
    return store.read(lambda c: q.list_goals(c, None))


def goal_json(store: SyncStore, cfg: Config, goal_id: int) -> JSON:
    """What `agentd goal show --json` prints: the goal, its runs, spend and next check-in."""
    goal, runs, spend = goals.details(store, goal_id)
    outlook = plan.outlook(store, cfg, goal_id)
    out: JSON = {**jsonable(goal), "runs": jsonable(runs), "spend": spend}
    out["checkin"] = as_json(outlook)
    return out


def goal_outlook(store: SyncStore, cfg: Config, goal_id: int) -> tuple[Goal, list[Run], JSON]:
    goal, runs, _ = goals.details(store, goal_id)
    return goal, runs, plan.outlook(store, cfg, goal_id)


def run_steps(store: SyncStore, run_id: int) -> tuple[Run, Goal, list[Step]]:
    return goals.run_details(store, run_id)


def run_json(store: SyncStore, run_id: int) -> JSON:
    """What `agentd runs show --json` prints."""
    run, goal, steps = goals.run_details(store, run_id)
    return jsonable(show_json(run, goal, steps))  # type: ignore[no-any-return]


# ── approve with an edit: a form from the action's argument schema ──────────────────────────


def arg_fields(store: SyncStore, cfg: Config, item: InboxItem) -> list[tuple[str, str, Any]]:
    """(name, JSON type, current value) of each argument of an approval's action, from the
    action's schema (agentd/decide.py Menu, as `inbox approve --edit` validates), for the
    approve-with-edit form; [] when the item cannot be edited."""
    if item.kind != InboxKind.APPROVAL or item.action is None or item.run_id is None:
        return []
    run_id = item.run_id
    agent = cfg.agents.get(store.read(lambda c: q.get_run(c, run_id).agent))
    model = None if agent is None else Menu(cfg, agent).models.get(item.action)
    if model is None:
        return []
    props = model.model_json_schema().get("properties", {})
    args = item.args or {}
    return [(k, _type(p), args.get(k)) for k, p in props.items() if k != "kind"]


def _type(prop: JSON) -> str:
    if "type" in prop:
        return str(prop["type"])
    kinds = [str(p.get("type")) for p in prop.get("anyOf", []) if p.get("type") != "null"]
    return kinds[0] if len(kinds) == 1 else "json"


def parse_edit(fields: list[tuple[str, str, Any]], form: dict[str, str]) -> JSON | None:
    """The edited arguments from a submitted form: only those that changed; None if none did."""
    edit: JSON = {}
    for name, kind, current in fields:
        key = f"arg.{name}"
        if kind == "boolean":
            value: Any = form.get(key) == "on"
        elif key not in form:
            continue
        else:
            value = _parse(name, kind, form[key])
        if value != current:
            edit[name] = value
    return edit or None


def _parse(name: str, kind: str, text: str) -> Any:
    try:
        if kind == "string":
            return text
        if kind == "integer":
            return int(text.strip())
        if kind == "number":
            return float(text.strip())
        return json.loads(text) if text.strip() else None
    except ValueError:
        raise UsageError(f"{name}: {text[:80]!r} is not a valid {kind}") from None


def act(store: SyncStore, cfg: Config, item_id: int, verb: str, form: dict[str, str]) -> str:
    """Carry out one operator decision through agentd/inbox.py; returns what was done."""
    text = form.get("text", "")
    if verb == "approve":
        item, _ = item_with_goal(store, item_id)
        edit = parse_edit(arg_fields(store, cfg, item), form)
        inbox.approve(store, cfg, item_id, edit, form.get("note", ""))
        return f"approved item {item_id}" + (" with edits" if edit else "")
    if verb == "deny":
        inbox.deny(store, item_id, text)
        return f"denied item {item_id}"
    if verb == "answer":
        inbox.answer(store, item_id, text)
        return f"answered item {item_id}"
    if verb == "dismiss":
        inbox.dismiss(store, item_id, text, now=plan.home_now(store))
        return f"dismissed item {item_id}"
    if verb == "accept":
        done = inbox.accept(store, cfg, item_id, now=plan.home_now(store))
        run_id = done.data.get("run_id")
        return f"accepted item {item_id}" + (f": run {run_id} starts" if run_id else "")
    raise UsageError(f"unknown action {verb!r}")
