"""An agent's action menu as pydantic models, its JSON schema, and validation of model replies.

The menu is a plain Union of one model per action, each with `kind: Literal[name]` (anyOf, which every
vendor's structured output accepts). A reply is untrusted: it is parsed against the menu and either
becomes a Decision or raises ModelOutputInvalid with a message the model can act on.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, NoReturn, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    create_model,
)
from pydantic import model_validator as _model_validator

from agentd.config import (
    AgentConfig,
    BuiltinAction,
    CommandAction,
    Config,
    HttpAction,
    McpToolAction,
    Param,
    schema_mismatch,
)
from agentd.errors import ModelOutputInvalid
from agentd.harness import mail
from agentd.models import JSON, action_digest
from agentd.text import url_shown

# A decision is a few hundred characters; anything far longer is a runaway or hostile reply, and
# every step below (fence stripping, the depth scan, json, pydantic) is linear in this bound.
MAX_REPLY_CHARS = 64_000
# A decision nests three deep ({"action": {"match": {...}}}); past this a reply is refused before
# json.loads or pydantic recurse into it.
_MAX_DEPTH = 32
# Digits of one JSON number: int() is quadratic in them, and its global limit is a ValueError.
_MAX_NUMBER_CHARS = 1000


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


def _sleep_variants(schema: dict[str, Any]) -> None:
    """`sleep`'s schema as two variants, {seconds} or {until}, each with its field required and
    not nullable: "exactly one of" in a form grammar converters enforce (two optional nullable
    fields let a constrained model write both null). Validation stays _SleepArgs' own."""
    props = schema.pop("properties", {})
    schema.pop("required", None)
    schema.pop("type", None)
    schema.pop("additionalProperties", None)
    kind = props.get("kind", {})
    variants = []
    for name, spec in (("seconds", {"type": "number", "exclusiveMinimum": 0}),
                       ("until", {"type": "string", "format": "date-time"})):  # fmt: skip
        field = {**spec, "description": (props.get(name) or {}).get("description", name)}
        variants.append({
            "type": "object", "properties": {"kind": kind, name: field},
            "required": ["kind", name], "additionalProperties": False,
        })  # fmt: skip
    schema["anyOf"] = variants


class _SleepArgs(_Closed):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_sleep_variants)

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

    def check(value: str) -> str:
        if (why := p.refusal(value)) is not None:
            raise ValueError(why)
        return value

    # Checked in Python (a whole-value match, no leading '-'), as the executors re-check it; the
    # schema shows the model the length and the pattern, anchored: a search then agrees with it.
    schema: JSON = {"type": "string", "maxLength": p.max_length}
    if p.pattern is not None:
        schema["pattern"] = f"^(?:{p.pattern})$"
    return Annotated[str, AfterValidator(check), WithJsonSchema(schema)]


def _fields_for(name: str, cfg: Any) -> dict[str, Any]:
    """The argument fields of one action (besides `kind`)."""
    fields: dict[str, Any] = {
        pname: (_param_type(p), Field(description=p.description)) for pname, p in cfg.params.items()
    }
    if isinstance(cfg, HttpAction):
        # Labels, never URLs (a path or query may hold a token); the executor fills params and
        # secrets in. `describe` shows each label's host.
        fields["url"] = (Literal[tuple(cfg.labels)], ...)
        fields["method"] = (Literal[tuple(cfg.methods)], cfg.methods[0])
        fields["body"] = (str | None, None)
    elif isinstance(cfg, McpToolAction):
        fields["arguments"] = (_tool_arguments(cfg), Field(default_factory=dict))
    elif isinstance(cfg, BuiltinAction):
        fields.update(_builtin_fields(cfg))
    elif (mail_fields := mail.fields_for(cfg)) is not None:
        fields.update(mail_fields)
    return fields


def _tool_arguments(cfg: McpToolAction) -> Any:
    """An mcp_tool's `arguments`: checked here against the config's `input_schema` when it
    declares one (so a bad reply is re-asked before anyone approves it), else any object; the
    executor checks them again against the tool's own schema before sending."""
    declared = cfg.input_schema
    key_arg = cfg.idempotency_arg

    def check(value: dict[str, Any]) -> dict[str, Any]:
        if key_arg is not None and key_arg in value:  # never the model's: agentd fills it
            raise ValueError(f"{key_arg!r} is filled by agentd; leave it out")
        if declared is not None and (problem := schema_mismatch(declared, value)) is not None:
            raise ValueError(problem)
        return value

    schema: JSON = declared or {"type": "object", "description": f"the arguments of {cfg.tool}"}
    return Annotated[dict[str, Any], AfterValidator(check), WithJsonSchema(schema)]


def _builtin_fields(cfg: BuiltinAction) -> dict[str, Any]:
    text = Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    if cfg.type == "finish":
        return {"outcome": (Literal["succeeded", "failed"], ...), "summary": (text, ...)}
    if cfg.type == "ask":
        return {"question": (text, ...)}
    if cfg.type == "notify":
        return {"message": (text, ...)}
    if cfg.type == "build":
        requirement = Annotated[str, StringConstraints(min_length=1, max_length=500)]
        given = dict[str, str | int | float | bool | list[str]]
        return {
            "request": (text, ...),
            "requirements": (list[requirement], Field(default_factory=list, max_length=20)),
            # The delivering action's other arguments (a reply's message_id, to, subject): the
            # build writes only its text; the harness checks the whole delivery as any action.
            "deliver_args": (given, Field(default_factory=dict, max_length=10)),
        }
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
        self.definitions: dict[str, Any] = {}  # name → its ActionConfig
        for name in agent.actions:
            cfg = self.definitions[name] = config.action(name)
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
        """Validate a model's raw reply; ModelOutputInvalid says what was wrong, for a re-ask.

        Any reply, however hostile, ends here as a Decision or ModelOutputInvalid, and the work
        is bounded by MAX_REPLY_CHARS: nothing below backtracks or recurses with the input.
        """
        data = _load(raw)
        if not isinstance(data, dict) or not isinstance(data.get("action"), dict):
            raise ModelOutputInvalid('reply must be an object {"reason": ..., "action": {...}}')
        kind = data["action"].get("kind")
        if not isinstance(kind, str) or kind not in self.models:  # a list kind is unhashable
            raise ModelOutputInvalid(
                f"unknown action {_clip(repr(kind))}; choose one of: {', '.join(self.models)}"
            )
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            raise ModelOutputInvalid("`reason` must be a string")
        args = self.validate_args(kind, {k: v for k, v in data["action"].items() if k != "kind"})
        # Control characters stay: the reason is data, and rendering neutralises them.
        return Decision(action=kind, args=args, reason=reason[:2000])

    def validate_args(self, action: str, args: JSON) -> JSON:
        """Arguments checked against the action's schema, in canonical (JSON) form."""
        model = self.models.get(action)
        if model is None:
            raise ModelOutputInvalid(f"unknown action {action!r}")
        args = _by_label(self.definitions[action], args)
        if "kind" in args:  # an edit must not switch the action the approval was for
            raise ModelOutputInvalid(
                f"`kind` cannot be changed: these are the arguments of {action}; "
                "to run another action, deny this one and the run chooses again"
            )
        try:
            parsed = model.model_validate({**args, "kind": action})
        except ValidationError as e:
            raise ModelOutputInvalid(f"invalid arguments for {action}: {_brief(e)}") from None
        except RecursionError:
            raise ModelOutputInvalid(f"arguments for {action} nest too deeply") from None
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
            entry = {"action": name, "description": model.__doc__ or "", "arguments": props}
            cfg = self.definitions[name]
            if isinstance(cfg, HttpAction):  # where each label leads: its host, not its URL
                entry["urls"] = {label: url_shown(t) for label, t in cfg.labels.items()}
            out.append(entry)
        return out


def _by_label(cfg: Any, args: JSON) -> JSON:
    """An http action's arguments with a list's template, written out as its own label (as
    journals and approvals before labels hid URLs have it), replaced by its label."""
    url = args.get("url")
    if not isinstance(cfg, HttpAction) or not isinstance(url, str) or url in cfg.labels:
        return args
    by_template = {t: label for label, t in cfg.labels.items()}
    return {**args, "url": by_template[url]} if url in cfg.url_templates else args


def _class_name(action: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", action) if p) or "Action"


def _default_description(cfg: Any) -> str:
    if (said := mail.describe(cfg)) is not None:
        return said
    if isinstance(cfg, CommandAction):
        return f"Run the command {' '.join(cfg.argv)}."
    if isinstance(cfg, HttpAction):
        return f"Send an HTTP request to one of: {', '.join(cfg.labels)}."
    if isinstance(cfg, McpToolAction):
        server = url_shown(cfg.url) if cfg.url is not None else cfg.where()
        return f"Call the tool {cfg.tool} of the MCP server {server}."
    return {
        "finish": "End the run: succeeded when the goal's criteria hold, failed when they cannot.",
        "ask": "Ask the operator a question and wait for the answer.",
        "notify": "Post a notice to the operator's inbox and continue.",
        "sleep": "Wait for a number of seconds (or until a time), then look again.",
        "wait_event": "Wait until an event with this name (and matching fields) arrives.",
        "build": "Start a build of an artifact (a document, plan, reply) for this goal: it is "
        "drafted, judged against the request and requirements, and revised; the run goes on.",
    }[cfg.type]


def _load(raw: str) -> Any:
    """The JSON value of a reply, within the bounds above; every failure is ModelOutputInvalid."""
    if len(raw) > MAX_REPLY_CHARS:
        raise ModelOutputInvalid(
            f"reply is {len(raw)} characters; the limit is {MAX_REPLY_CHARS} — "
            "answer with one short JSON object"
        )
    text = _strip_fences(raw)
    if _too_deep(text):
        raise ModelOutputInvalid(
            f"reply nests more than {_MAX_DEPTH} levels deep; answer with one flat JSON object"
        )
    try:
        # strict=False: a raw newline or tab inside a string (small models write them, and a
        # grammar-constrained server lets them through) is read as that character.
        data = json.loads(
            text,
            strict=False,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_no_constant,
        )
    except json.JSONDecodeError as e:
        raise ModelOutputInvalid(f"reply is not valid JSON ({e.msg} at char {e.pos})") from None
    # Backstops, should the checks above ever miss: json's own recursion limit, and the global
    # int-string limit (sys.set_int_max_str_digits) if set below _MAX_NUMBER_CHARS.
    except RecursionError:
        raise ModelOutputInvalid(
            "reply nests too deeply; answer with one flat JSON object"
        ) from None
    except ValueError:
        raise ModelOutputInvalid("a number in the reply is too long; write it shorter") from None
    try:
        # Lone surrogates (\ud800) decode but cannot be encoded: not in a digest, nor on a terminal.
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise ModelOutputInvalid("reply contains an unpaired surrogate (\\ud800-\\udfff)") from None
    return data


def _strip_fences(raw: str) -> str:
    """The reply without a Markdown fence around it (```json ... ``` or ``` ... ```), else as is.

    String operations only, linear in the length: the regex this replaces backtracked cubically
    on a fence, a long run of whitespace, then anything but a fence (3,000 spaces: seconds).
    """
    text = raw.strip()
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    return text[3:-3].removeprefix("json").strip()


def _too_deep(text: str) -> bool:
    """Whether [ and { nest past _MAX_DEPTH outside JSON strings — an upper bound on how deep
    json.loads would recurse into the text, found without recursing."""
    if text.count("[") + text.count("{") <= _MAX_DEPTH:  # nearly every reply: no scan needed
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _parse_int(token: str) -> int:
    if len(token) > _MAX_NUMBER_CHARS:
        raise ModelOutputInvalid(f"a number in the reply has {len(token)} digits; write it shorter")
    return int(token)


def _parse_float(token: str) -> float:
    if len(token) > _MAX_NUMBER_CHARS:
        raise ModelOutputInvalid(f"a number in the reply has {len(token)} digits; write it shorter")
    value = float(token)
    if not math.isfinite(value):
        raise ModelOutputInvalid(f"the number {_clip(token)} is out of range")
    return value


def _no_constant(token: str) -> NoReturn:
    raise ModelOutputInvalid(f"{token} is not a JSON number; give a finite number")


def _clip(text: str, limit: int = 80) -> str:
    """Reply text quoted in an error message, kept short: the message goes back into a prompt."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _brief(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(_clip(str(p), 40) for p in e["loc"] if p != "kind") or "arguments"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)
