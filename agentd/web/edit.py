"""Approve with an edit, on the web: the form's fields from the action's argument schema (as
`inbox approve --edit` validates), and the edit read back from a submitted form. Only a real
difference from the proposal is an edit: an untouched form approves exactly what was proposed,
an empty field leaves an argument unset, and a value the page cannot show raw stays as it was."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from agentd.config import Config
from agentd.errors import ModelOutputInvalid, UsageError
from agentd.harness.menu import Menu
from agentd.models import JSON, InboxItem, InboxKind
from agentd.operator import runs
from agentd.operator.home import HomeStore
from agentd.text import safe

# How the form's field types map from the schema: anything else is edited as JSON text.
KINDS = frozenset({"string", "integer", "number", "boolean"})


@dataclass(frozen=True)
class ArgField:
    """One argument of an approval's action, as the edit form shows it."""

    name: str
    kind: str  # "string" | "integer" | "number" | "boolean" | "json"
    value: Any  # as proposed; None: the model left it out
    required: bool
    choices: tuple[str, ...] = ()  # an enum: shown as a select

    @property
    def key(self) -> str:
        return f"arg.{self.name}"

    @property
    def inert(self) -> bool:
        """A string with control, bidi or invisible characters: an editable field would show
        them raw, so the page shows it escaped and read-only, and keeps it as proposed."""
        if not isinstance(self.value, str):
            return False
        return safe(self.value, multiline=True, continuation="") != self.value


def _menu(store: HomeStore, cfg: Config, item: InboxItem) -> Menu | None:
    if item.kind != InboxKind.APPROVAL or item.action is None or item.run_id is None:
        return None
    agent = cfg.agents.get(runs.get_run(store, item.run_id).agent)
    return None if agent is None else Menu(cfg, agent)


def arg_fields(store: HomeStore, cfg: Config, item: InboxItem) -> list[ArgField]:
    """The fields of an approval's edit form; [] when it cannot be edited (not an approval, or
    its agent is no longer configured)."""
    menu = _menu(store, cfg, item)
    model = None if menu is None or item.action is None else menu.models.get(item.action)
    if model is None:
        return []
    properties, required = _arguments(model.model_json_schema())
    args = item.args or {}
    return [
        _field(name, prop, args.get(name), name in required)
        for name, prop in properties.items()
        if name != "kind"
    ]


def _arguments(schema: JSON) -> tuple[dict[str, JSON], set[str]]:
    """An action's arguments and the required ones. A schema given as variants (sleep's:
    {seconds} or {until}, harness/menu.py) has each variant's arguments, in order, and requires
    only what every variant requires (the model's validation says which combinations fit)."""
    variants = [schema] if "properties" in schema else schema.get("anyOf", [])
    properties: dict[str, JSON] = {}
    for variant in variants:
        for name, prop in variant.get("properties", {}).items():
            properties.setdefault(name, prop)
    needed = [set(v.get("required", [])) for v in variants]
    return properties, set.intersection(*needed) if needed else set()


def _field(name: str, prop: JSON, value: Any, required: bool) -> ArgField:
    options = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    one = options[0] if len(options) == 1 else {}
    kind = str(one.get("type", "json"))
    choices = tuple(str(c) for c in one.get("enum", [])) if kind == "string" else ()
    return ArgField(name, kind if kind in KINDS else "json", value, required, choices)


def submitted(store: HomeStore, cfg: Config, item: InboxItem, form: dict[str, str]) -> JSON | None:
    """The edit a submitted approve form asks for, validated against the action's schema; None
    when it approves the proposal as it is (the plain Approve form sends no argument at all)."""
    fields = arg_fields(store, cfg, item)
    edit = parse_edit(fields, form)
    menu = _menu(store, cfg, item)
    if edit is None or menu is None or item.action is None:
        return None
    proposed = item.args or {}
    try:
        args = menu.validate_args(item.action, {**proposed, **edit})
    except ModelOutputInvalid as e:
        raise UsageError(f"the edited arguments were not approved: {e}") from None
    return None if _canonical(args) == _canonical(proposed) else edit


def parse_edit(fields: list[ArgField], form: dict[str, str]) -> JSON | None:
    """The arguments whose submitted value differs from the proposal (None: unset it); None when
    none does. A field not in the form, or shown read-only, keeps its proposed value."""
    edit: JSON = {}
    for field in fields:
        if field.key not in form or field.inert:
            continue
        value = _parse(field, form[field.key])
        if value is None and field.required:
            raise UsageError(f"{field.name} is required: give it a value")
        if _canonical(value) != _canonical(field.value):
            edit[field.name] = value
    return edit or None


def _parse(field: ArgField, text: str) -> Any:
    """A field's text as a value; None for an empty field (leave the argument unset)."""
    if field.kind == "string":
        # Browsers send a textarea's line breaks as CRLF; an editable value has no CR of its
        # own (a CR is a control character: such a value is read-only), so LF is exact.
        text = text.replace("\r\n", "\n")
        if not text and not field.required and field.value != "":
            return None
        return text
    if not text.strip():
        return None
    try:
        if field.kind == "boolean":
            return {"true": True, "false": False}[text.strip()]
        if field.kind == "integer":
            return int(text.strip())
        if field.kind == "number":
            number = float(text.strip())
            if not math.isfinite(number):
                raise ValueError(text)
            return number
        return json.loads(text)
    except (ValueError, KeyError):
        what = "JSON" if field.kind == "json" else f"{field.kind} ({_KIND_HINT[field.kind]})"
        raise UsageError(f"{field.name}: {text[:80]!r} is not valid {what}") from None


_KIND_HINT = {"boolean": "true or false", "integer": "a whole number", "number": "a number"}


def _canonical(value: Any) -> str:
    """One text per value, so 1 and True, or 1 and 1.0, are never taken for each other."""
    return json.dumps(value, sort_keys=True)
