"""An agent's action menu as pydantic models, its JSON schema, and validation of model replies.

The menu is a plain Union of one model per action, each with `kind: Literal[name]` (anyOf, which every
vendor's structured output accepts). A reply is untrusted: it is parsed against the menu and either
becomes a Decision or raises ModelOutputInvalid with a message the model can act on.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model
from pydantic import model_validator as _model_validator

from agentd.config import (
    AgentConfig,
    BuiltinAction,
    CommandAction,
    Config,
    HttpAction,
    Param,
)
from agentd.errors import ModelOutputInvalid
from agentd.models import JSON, action_digest


@dataclass(frozen=True)
class Decision:
    """One validated choice from the menu."""

    action: str
    args: JSON
    reason: str

    @property
    def digest(self) -> str:
        return action_digest(self.action, self.args)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _SleepArgs(_Closed):
    seconds: float | None = Field(None, gt=0, description="how long to sleep")
    until: datetime | None = Field(None, description="or: an ISO 8601 time with offset")

    @_model_validator(mode="after")
    def _one_of(self) -> _SleepArgs:
        if (self.seconds is None) == (self.until is None):
            raise ValueError("give exactly one of `seconds` or `until`")
        if self.until is not None and self.until.tzinfo is None:
            raise ValueError("`until` needs a UTC offset, e.g. 2026-01-01T09:00:00+00:00")
        return self


def _param_type(p: Param) -> Any:
    if p.choices:
        return Literal[tuple(p.choices)]
    return Annotated[str, StringConstraints(max_length=p.max_length, pattern=p.pattern)]


def _fields_for(name: str, cfg: Any) -> dict[str, Any]:
    """The argument fields of one action (besides `kind`)."""
    fields: dict[str, Any] = {
        pname: (_param_type(p), Field(description=p.description)) for pname, p in cfg.params.items()
    }
    if isinstance(cfg, HttpAction):
        fields["url"] = (Literal[tuple(cfg.urls)], ...)
        fields["method"] = (Literal[tuple(cfg.methods)], cfg.methods[0])
        fields["body"] = (str | None, None)
    elif isinstance(cfg, BuiltinAction):
        fields.update(_builtin_fields(cfg))
    return fields


def _builtin_fields(cfg: BuiltinAction) -> dict[str, Any]:
    text = Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    if cfg.type == "finish":
        return {"outcome": (Literal["succeeded", "failed"], ...), "summary": (text, ...)}
    if cfg.type == "ask":
        return {"question": (text, ...)}
    if cfg.type == "notify":
        return {"message": (text, ...)}
    if cfg.type == "sleep":
        return {}  # fields come from _SleepArgs; the engine clamps to max_sleep_s
    event_type: Any = Literal[tuple(cfg.events)] if cfg.events else str
    return {
        "event": (event_type, ...),
        "match": (dict[str, str | int | float | bool], Field(default_factory=dict)),
        "timeout_s": (float | None, Field(None, gt=0)),
    }


class Menu:
    """The actions one agent may choose from, as validating models."""

    def __init__(self, config: Config, agent: AgentConfig) -> None:
        self.config = config
        self.agent = agent
        self.models: dict[str, type[BaseModel]] = {}
        for name in agent.actions:
            cfg = config.action(name)
            self.models[name] = create_model(
                _class_name(name),
                __base__=_SleepArgs if getattr(cfg, "type", None) == "sleep" else _Closed,
                __doc__=cfg.description or _default_description(cfg),
                kind=(Literal[name], ...),  # type: ignore[arg-type]  # a Literal built at run time
                **_fields_for(name, cfg),
            )
        members = tuple(self.models.values())
        union: Any = members[0] if len(members) == 1 else Union[members]  # noqa: UP007
        self.decision_model: type[BaseModel] = create_model(
            "Decision",
            __base__=_Closed,
            reason=(str, Field("", description="one or two sentences: why this action now")),
            action=(union, ...),
        )

    @functools.cached_property
    def _schema(self) -> JSON:
        return self.decision_model.model_json_schema()

    def schema(self) -> JSON:
        """The decision's JSON schema (built once: pydantic's schema generation is not cheap)."""
        return copy.deepcopy(self._schema)

    def parse(self, raw: str) -> Decision:
        """Validate a model's raw reply; ModelOutputInvalid says what was wrong, for a re-ask."""
        try:
            data = json.loads(_strip_fences(raw))
        except json.JSONDecodeError as e:
            raise ModelOutputInvalid(f"reply is not valid JSON ({e.msg} at char {e.pos})") from None
        if not isinstance(data, dict) or not isinstance(data.get("action"), dict):
            raise ModelOutputInvalid('reply must be an object {"reason": ..., "action": {...}}')
        kind = data["action"].get("kind")
        if kind not in self.models:
            raise ModelOutputInvalid(
                f"unknown action {kind!r}; choose one of: {', '.join(self.models)}"
            )
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            raise ModelOutputInvalid("`reason` must be a string")
        args = self.validate_args(kind, {k: v for k, v in data["action"].items() if k != "kind"})
        return Decision(action=kind, args=args, reason=reason[:2000])

    def validate_args(self, action: str, args: JSON) -> JSON:
        """Arguments checked against the action's schema, in canonical (JSON) form."""
        model = self.models.get(action)
        if model is None:
            raise ModelOutputInvalid(f"unknown action {action!r}")
        try:
            parsed = model.model_validate({**args, "kind": action})
        except ValidationError as e:
            raise ModelOutputInvalid(f"invalid arguments for {action}: {_brief(e)}") from None
        dumped = parsed.model_dump(mode="json", exclude={"kind"}, exclude_none=True)
        return dict(dumped)

    def describe(self) -> list[JSON]:
        """Name, description and argument schema of each action, for prompts and `--help`."""
        return copy.deepcopy(self._described)

    @functools.cached_property
    def _described(self) -> list[JSON]:
        out = []
        for name, model in self.models.items():
            schema = model.model_json_schema()
            props = {k: v for k, v in schema.get("properties", {}).items() if k != "kind"}
            out.append({"action": name, "description": model.__doc__ or "", "arguments": props})
        return out


def _class_name(action: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", action) if p) or "Action"


def _default_description(cfg: Any) -> str:
    if isinstance(cfg, CommandAction):
        return f"Run the command {' '.join(cfg.argv)}."
    if isinstance(cfg, HttpAction):
        return "Send an HTTP request to one of the allowed URLs."
    return {
        "finish": "End the run: succeeded when the goal's criteria hold, failed when they cannot.",
        "ask": "Ask the operator a question and wait for the answer.",
        "notify": "Post a notice to the operator's inbox and continue.",
        "sleep": "Wait for a number of seconds (or until a time), then look again.",
        "wait_event": "Wait until an event with this name (and matching fields) arrives.",
    }[cfg.type]


def _strip_fences(raw: str) -> str:
    text = raw.strip()
    m = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    return m.group(1) if m else text


def _brief(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in e["loc"] if p != "kind") or "arguments"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)
