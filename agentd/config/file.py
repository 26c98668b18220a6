"""The config file as a whole: its top-level tables ([daemon], [mcp] and the families beside this
module), reading it, and errors that name the file, the line and the key, and what to fix.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentd.config import hooks as config_hooks
from agentd.config import notify as config_notify
from agentd.config.actions import ActionConfig, BuiltinAction
from agentd.config.agents import AgentConfig
from agentd.config.api import ApiConfig, WebConfig
from agentd.config.durations import seconds_keys
from agentd.config.mail import ImapSource, MailActionBase
from agentd.config.models import ModelConfig, Price
from agentd.config.sources import MAIL_EVENTS, SOURCE_STATES, SourceConfig
from agentd.config.store import StoreConfig
from agentd.config.telemetry import MetricsConfig, TracingConfig
from agentd.errors import ConfigError

BUILTIN_ACTIONS = ("finish", "ask", "notify", "sleep", "wait_event", "build")


def _unknown_action(agent: str, act: str, known: list[str]) -> str:
    """A misspelled action: the likeliest name meant, then every name there is — the config's
    own [actions.*] first, then the built-ins."""
    import difflib  # only on this error path

    close = difflib.get_close_matches(act, known, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"agents.{agent}.actions names unknown action {act!r} ({guess}define [actions.{act}] "
        f"or use one of {', '.join(known)})"
    )


class _Strict(BaseModel):  # as config/actions.Strict (ruff and pydantic see a model here)
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)


class DaemonConfig(_Strict):
    max_concurrent_runs: int = Field(8, ge=1, le=1000)
    poll_interval_s: float = Field(0.1, gt=0, le=5)
    shutdown_grace_s: float = Field(10.0, gt=0, le=300)
    watchdog_interval_s: float = Field(5.0, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    journal_retention_days: int = Field(90, ge=1)


class McpConfig(_Strict):
    """[mcp]: agentd as an MCP server (`agentd mcp`)."""

    # An MCP client is often a model, which must never approve its own gated action: with this
    # on, an `approve` tool asks the person at the client through elicitation; off, none exists.
    approvals: bool = False


class Config(_Strict):
    daemon: DaemonConfig = DaemonConfig()
    store: StoreConfig = StoreConfig()  # [store]: SQLite in the home, or a PostgreSQL URL
    mcp: McpConfig = McpConfig()
    api: ApiConfig = ApiConfig()
    web: WebConfig = WebConfig()
    metrics: MetricsConfig = MetricsConfig()  # [metrics]: GET /metrics (config/telemetry.py)
    tracing: TracingConfig = TracingConfig()  # [tracing]: OpenTelemetry traces
    models: dict[str, ModelConfig] = {}
    sources: dict[str, SourceConfig] = {}
    actions: dict[str, ActionConfig] = {}
    agents: dict[str, AgentConfig] = {}
    prices: dict[str, Price] = {}  # keyed by the model id the provider reports
    notify: dict[str, config_notify.NotifierConfig] = {}  # [notify.NAME]: channels
    hooks: dict[str, config_hooks.HookConfig] = {}  # [hooks.NAME]: inbound webhooks

    @model_validator(mode="after")
    def _hook_names_are_paths(self) -> Config:
        config_hooks.check_names(self.hooks)
        return self

    @model_validator(mode="after")
    def _notify_channels_exist(self) -> Config:
        config_notify.check_channels({n: a.notify for n, a in self.agents.items()}, self.notify)
        return self

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        for name, agent in self.agents.items():
            for key in ("model", "escalation_model", "summary_model", "checkin.model",
                        "build.model", "build.judge_model"):  # fmt: skip
                part, _, field = key.rpartition(".")
                ref = getattr(getattr(agent, part) if part else agent, field)
                if ref is not None and ref not in self.models:
                    raise ValueError(f"agents.{name}.{key} names unknown model {ref!r}")
            for src in agent.sources:
                if src not in self.sources:
                    raise ValueError(f"agents.{name}.sources names unknown source {src!r}")
            for act in agent.actions:
                if act not in self.actions and act not in BUILTIN_ACTIONS:
                    raise ValueError(_unknown_action(name, act, [*self.actions, *BUILTIN_ACTIONS]))
            if (deliver := agent.build.deliver) is not None and deliver not in agent.actions:
                raise ValueError(
                    f"agents.{name}.build.deliver names {deliver!r}, not in its actions"
                )
            for act in [*agent.policy.rules, *agent.policy.max_per_hour]:
                if act not in agent.actions:
                    raise ValueError(f"agents.{name}.policy names {act!r}, not in its actions")
        return self

    @model_validator(mode="after")
    def _mail_actions_name_a_mailbox(self) -> Config:
        for name, act in self.actions.items():
            if not isinstance(act, MailActionBase):
                continue
            if not isinstance(self.sources.get(act.source), ImapSource):
                imap = [n for n, s in self.sources.items() if isinstance(s, ImapSource)]
                raise ValueError(
                    f"actions.{name}.source names {act.source!r}, not an imap source "
                    f"(imap sources: {', '.join(sorted(imap)) or 'none defined'})"
                )
            smtp = getattr(act, "smtp", None)
            if smtp is not None and getattr(self.notify.get(smtp), "type", None) != "email":
                raise ValueError(
                    f"actions.{name}.smtp names {smtp!r}, not an email channel in [notify]"
                )
        return self

    @model_validator(mode="after")
    def _triggers_can_fire(self) -> Config:
        """A trigger (or an event a wait_event action may wait for) naming a source is one of
        that source's states, and some agent watches the source (else nothing ever emits it).
        Other names are events the operator sends (`agentd event send`)."""
        named = [(f"agents.{n}.triggers", t) for n, a in self.agents.items() for t in a.triggers]
        named += [
            (f"actions.{n}.events", e)
            for n, a in self.actions.items()
            if isinstance(a, BuiltinAction)
            for e in a.events or []
        ]
        for key, event in named:
            if problem := self._unemitted(event):
                raise ValueError(f"{key}: {event!r} {problem}")
        return self

    def _unemitted(self, event: str) -> str | None:
        """Why nothing could ever emit `event`, or None."""
        source, dot, state = event.rpartition(".")
        if not event.strip() or event != event.strip():
            return "is not an event name"
        if dot and state in SOURCE_STATES and source not in self.sources:
            known = ", ".join(sorted(self.sources)) or "none defined"
            return f"names unknown source {source!r} (sources: {known})"
        if source not in self.sources:
            return None
        if isinstance(self.sources[source], ImapSource) and state not in SOURCE_STATES:
            if state in MAIL_EVENTS and any(source in a.sources for a in self.agents.values()):
                return None  # its connection emits them, watched or not
            if state in MAIL_EVENTS:
                return (
                    f"is never emitted, as no agent has {source!r} in its sources (the daemon "
                    "follows the mailboxes its agents use)"
                )
            return (
                f"- imap source {source!r} emits "
                + ", ".join(f"{source}.{s}" for s in (*MAIL_EVENTS, *SOURCE_STATES))
                + " (the states when an agent watches it)"
            )
        if state not in SOURCE_STATES:
            return f"- source {source!r} emits only " + ", ".join(
                f"{source}.{s}" for s in SOURCE_STATES
            )
        if not self.watchers(source):
            return (
                f"is never emitted, as no agent watches source {source!r}; add "
                "`watch = { interval_s = 10 }` to an agent that has it in its sources"
            )
        return None

    def state_trigger(self, trigger: str) -> tuple[str, str] | None:
        """(source, state) when `trigger` names a source's state (`health.unhealthy`)."""
        source, _, state = trigger.rpartition(".")
        return (source, state) if source in self.sources and state in SOURCE_STATES else None

    def watchers(self, source: str) -> list[str]:
        """The agents that poll `source` between runs (and so emit its states), by name."""
        return sorted(n for n, a in self.agents.items() if a.watch and source in a.sources)

    def price_of(self, model_id: str) -> Price | None:
        """The price for a model id as the provider reports it: an exact key, else the longest
        key it starts with (vendors answer with dated snapshots of the names configured)."""
        if model_id in self.prices:
            return self.prices[model_id]
        keys = [k for k in self.prices if model_id.startswith(k)]
        return self.prices[max(keys, key=len)] if keys else None

    def action(self, name: str) -> ActionConfig:
        """The definition of an action name, built-ins included."""
        if name in self.actions:
            return self.actions[name]
        return BuiltinAction.model_validate({"type": name})


def load(path: Path) -> Config:
    """Read and validate a config file; relative paths in it are relative to its folder."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        # The same hint as every command on a home without a database (cli/root.open_store).
        raise ConfigError(
            f"{path}: no config file; run `agentd --home {path.parent} init` to write one"
        ) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from None
    return parse(text, path)


def parse(text: str, path: Path) -> Config:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    _resolve_paths(raw, path.parent)
    try:
        return Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_describe(e, raw, text, path)) from None


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for model in raw.get("models", {}).values():
        if isinstance(model, dict):
            for key in ("replies", "request_log"):
                if isinstance(model.get(key), str):
                    model[key] = str(base / Path(model[key]).expanduser())
    # As documented in `load`: a log file or working directory given relative to the config
    # file, not to wherever the daemon happens to start.
    for table, key in (("sources", "path"), ("sources", "cwd"), ("actions", "cwd")):
        for entry in (raw.get(table) or {}).values():
            if isinstance(entry, dict) and isinstance(entry.get(key), str) and entry[key]:
                entry[key] = str(base / Path(entry[key]).expanduser())


def _key_path(raw: Any, loc: tuple[Any, ...]) -> list[str]:
    """The error location as keys of the file, without pydantic's union-tag and wrapper steps."""
    out: list[str] = []
    node = raw
    for i, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            node = node[part]
        elif i < len(loc) - 1:
            continue  # a discriminator tag or validator name, not a key in the file
        out.append(str(part))
    return out


_NAMED_KEY = re.compile(r"^Value error, ((?:agents|sources|actions|models|notify)(?:\.[\w-]+)+)")


def _describe(err: ValidationError, raw: dict[str, Any], text: str, path: Path) -> str:
    lines = [f"{path}: invalid config:"]
    for item in err.errors():
        loc = _key_path(raw, item["loc"])
        msg = item["msg"]
        if not loc and (named := _NAMED_KEY.match(msg)):
            loc = named.group(1).split(".")  # a cross-table check names the key it is about
            msg = msg[named.end() :].lstrip(": ")
        if item["type"] == "extra_forbidden":
            msg = "unknown key; remove it or check its spelling against config.example.toml"
        elif item["type"] == "missing":
            msg = "required key is missing"
        elif item["type"] == "union_tag_not_found":
            msg = _no_tag(item, loc)
        elif item["type"] == "union_tag_invalid":
            ctx = item.get("ctx") or {}
            field = str(ctx.get("discriminator", "type")).strip("'")
            loc = [*loc, field]  # the key to fix: `type = …`, `provider = …`
            msg = (
                f"unknown {field} {ctx.get('tag')!r}; use one of {ctx.get('expected_tags')}"
                if ctx
                else f"unknown type; {msg}"
            )
        key = ".".join(loc) or "(top level)"
        line = _line_of(text, loc)
        where = f"line {line}, " if line else ""
        lines.append(f"  {where}{key}: {msg}")
    return "\n".join(lines)


def _no_tag(item: Any, loc: list[str]) -> str:
    """`[sources.web] has no "type"; did you mean "type" (found "tpye")? one of: http, …`."""
    import difflib  # only on a config error

    field = str((item.get("ctx") or {}).get("discriminator", "type")).strip("'")
    given = item.get("input")
    keys = [str(k) for k in given] if isinstance(given, dict) else []
    msg = f'[{".".join(loc)}] has no "{field}"'
    if close := difflib.get_close_matches(field, keys, n=1, cutoff=0.6):
        msg += f'; did you mean "{field}" (found "{close[0]}")?'
    if tags := _tags_of(loc, field):
        msg += f"{'' if close else ';'} one of: {tags}"
    return msg


def _tags_of(loc: list[str], field: str) -> str | None:
    """The values `field` may take in the table family at `loc` (`http, log, command, mcp`),
    asked of the model itself by validating a tag it cannot know."""
    if len(loc) != 2:
        return None
    try:
        Config.model_validate({loc[0]: {loc[1]: {field: "\x00"}}})
    except ValidationError as e:
        for err in e.errors():
            if err["type"] == "union_tag_invalid":
                return str((err.get("ctx") or {}).get("expected_tags", "")).replace("'", "")
    return None


def _line_of(text: str, loc: list[str]) -> int | None:
    """Best-effort line of a dotted key: the table's own [header] when the key is a table, else
    its [table] header, then the key inside the table."""
    rows = text.splitlines()
    own = re.compile(r"^\s*\[+\s*" + r"\s*\.\s*".join(map(re.escape, loc)) + r"\s*\]+\s*(?:#.*)?$")
    if loc and (mine := [i for i, r in enumerate(rows) if own.match(r)]):
        return mine[0] + 1
    best: int | None = None
    for depth in range(len(loc), 0, -1):
        table, key = loc[: depth - 1], loc[depth - 1]
        header = re.compile(
            r"^\s*\[+\s*" + r"\s*\.\s*".join(map(re.escape, table)) + r"\s*\]+\s*(?:#.*)?$"
        )
        start = 0
        if table:
            found = [i for i, r in enumerate(rows) if header.match(r)]
            if not found:
                continue
            start = found[0] + 1
            best = best or start
        key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        sub_header = re.compile(
            r"^\s*\[+\s*" + r"\s*\.\s*".join(map(re.escape, [*table, key])) + r"\s*\]+\s*(?:#.*)?$"
        )
        for i in range(start, len(rows)):
            if (
                table
                and i > start
                and rows[i].lstrip().startswith("[")
                and not key_re.match(rows[i])
            ):
                if sub_header.match(rows[i]):
                    return i + 1
                break
            if key_re.match(rows[i]) or sub_header.match(rows[i]):
                return i + 1
        if not table:
            for i, r in enumerate(rows):
                if sub_header.match(r):
                    return i + 1
    return best
