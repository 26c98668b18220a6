"""The config file (`$AGENTD_HOME/config.toml`) validated at the edge, and where state lives.
The table families live one module each beside this one (actions, sources, models, notify,
api, build); this package re-exports what callers use. May import the ground only.

Only this module reads the environment. A bad file raises ConfigError naming the file, the line and the
key, and what to fix. Secrets are named by environment variable (`api_key_env`, an action's
`secret_env` and `{secret:NAME}`), never written here, and read only through `secret()`.
"""

from __future__ import annotations

import os
import re
import tomllib
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agentd.config import actions as config_actions
from agentd.config import api as config_api
from agentd.config import build as config_build
from agentd.config import models as config_models
from agentd.config import notify as config_notify
from agentd.config import sources as config_sources
from agentd.errors import ConfigError

# The action tables live in config_actions; re-exported so `agentd.config.Param` keeps working.
PARAM_PLACEHOLDER = config_actions.PARAM_PLACEHOLDER
SECRET_PLACEHOLDER = config_actions.SECRET_PLACEHOLDER
ActionConfig = config_actions.ActionConfig
BuiltinAction = config_actions.BuiltinAction
CommandAction = config_actions.CommandAction
HttpAction = config_actions.HttpAction
McpServerRef = config_actions.McpServerRef
McpToolAction = config_actions.McpToolAction
Param = config_actions.Param
schema_mismatch = config_actions.schema_mismatch
whole_match = config_actions.whole_match
BuildConfig = config_build.BuildConfig  # [agents.X.build]: the inner loop
ApiConfig = config_api.ApiConfig  # [api]: the local control API
WebConfig = config_api.WebConfig  # [web]: the web inbox
# The source tables live in config_sources; re-exported likewise.
HEALTHY, UNHEALTHY, CHECK_FAILED = (
    config_sources.HEALTHY,
    config_sources.UNHEALTHY,
    config_sources.CHECK_FAILED,
)
SOURCE_STATES = config_sources.SOURCE_STATES
http_url = config_sources.http_url
CommandSource = config_sources.CommandSource
FileTailSource = config_sources.FileTailSource
HttpSource = config_sources.HttpSource
McpSource = config_sources.McpSource
SourceConfig = config_sources.SourceConfig
Watch = config_sources.Watch


class _Strict(BaseModel):  # as config_actions.Strict (ruff and pydantic see a model here)
    model_config = ConfigDict(extra="forbid", frozen=True)


CONFIG_NAME = "config.toml"
DB_NAME = "agentd.db"
BUILTIN_ACTIONS = ("finish", "ask", "notify", "sleep", "wait_event", "build")


class DaemonConfig(_Strict):
    max_concurrent_runs: int = Field(8, ge=1, le=1000)
    poll_interval_s: float = Field(0.1, gt=0, le=5)
    shutdown_grace_s: float = Field(10.0, gt=0, le=300)
    watchdog_interval_s: float = Field(5.0, gt=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    journal_retention_days: int = Field(90, ge=1)


# The model tables live in config_models; re-exported likewise.
ScriptedModel = config_models.ScriptedModel
AnthropicModel = config_models.AnthropicModel
OpenAIModel = config_models.OpenAIModel
OtherModel = config_models.OtherModel
RunbookModel = config_models.RunbookModel
TemplateModel = config_models.TemplateModel
ModelConfig = config_models.ModelConfig


class ExpiryRule(_Strict):
    after_s: float = Field(gt=0)
    on_expire: Literal["deny", "remind"] = "deny"


class Policy(_Strict):
    default: Literal["allow", "approve", "deny"] = "allow"
    rules: dict[str, Literal["allow", "approve", "deny"]] = {}
    max_per_hour: dict[str, Annotated[int, Field(ge=0)]] = {}  # 0: never
    expire: dict[Literal["approval", "question"], ExpiryRule] = {}


class Limits(_Strict):
    max_steps: int = Field(50, ge=1)
    max_invalid_outputs: int = Field(3, ge=0)
    max_denials: int = Field(3, ge=1)
    loop_threshold: int = Field(3, ge=2)
    history_steps: int = Field(30, ge=1)
    retry_base_s: float = Field(5.0, gt=0)
    retry_max_s: float = Field(600.0, gt=0)


class Budget(_Strict):
    """Spend limits per goal of this agent; when one is reached the goal's run stops, visibly."""

    goal_tokens: int | None = Field(None, ge=1)  # input + output tokens over the goal's life
    goal_usd: float | None = Field(None, gt=0)  # cost over the goal's life (needs [prices])
    day_tokens: int | None = Field(None, ge=1)  # per goal per UTC day
    day_usd: float | None = Field(None, gt=0)


class Price(_Strict):
    """USD per million tokens for one model id, as the provider reports it."""

    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)
    cached_usd_per_mtok: float | None = Field(None, ge=0)  # default: the input price

    def cost_usd(self, tokens_in: int, tokens_out: int, tokens_cached: int = 0) -> float:
        cached_rate = (
            self.input_usd_per_mtok
            if self.cached_usd_per_mtok is None
            else self.cached_usd_per_mtok
        )
        fresh = max(tokens_in - tokens_cached, 0)
        return (
            fresh * self.input_usd_per_mtok
            + tokens_cached * cached_rate
            + tokens_out * self.output_usd_per_mtok
        ) / 1e6


_QUIET = re.compile(r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$")


class Checkin(_Strict):
    """When this agent's goals check back in on their own (the outer loop). Each goal starts
    from these; `agentd goal cadence` / `goal schedule` change one goal. Durations in seconds."""

    enabled: bool = True
    every_s: float = Field(86400.0, gt=0)  # the cadence when nothing says otherwise (1 day)
    min_s: float = Field(4 * 3600.0, gt=0)  # never look again sooner (the model cannot override)
    max_s: float = Field(14 * 86400.0, gt=0)  # never stay away longer (backoff stops here)
    quiet: str | None = "22:00-08:00"  # local quiet hours HH:MM-HH:MM (no fire inside), or "none"
    tz: str = "UTC"  # IANA time zone for quiet hours and cron schedules, e.g. "Europe/Berlin"
    model: str | None = None  # the check-in model (cheap); default: the agent's model
    misfire: Literal["skip", "once", "all"] = "once"  # fires missed while the daemon was down
    misfire_cap: int = Field(3, ge=1)  # with misfire = "all": at most this many catch-ups
    max_lateness_s: float = Field(86400.0, gt=0)  # older missed fires are recorded as skipped
    jitter_s: float = Field(600.0, ge=0)  # a stable per-goal offset in [0, jitter_s)
    deadline_looks: int = Field(3, ge=1)  # looks spread before a goal's deadline

    @field_validator("quiet", mode="before")
    @classmethod
    def _no_quiet(cls, value: object) -> object:
        # TOML has no null: `quiet = "none"` (or "") turns quiet hours off.
        return (
            None
            if isinstance(value, str) and value.strip().lower() in ("", "none", "off")
            else value
        )

    @model_validator(mode="after")
    def _coherent(self) -> Checkin:
        if not self.min_s <= self.every_s <= self.max_s:
            raise ValueError("checkin needs min_s <= every_s <= max_s")
        if self.quiet is not None and not _QUIET.match(self.quiet):
            raise ValueError('checkin.quiet must look like "22:00-08:00" (local HH:MM-HH:MM)')
        try:
            zoneinfo.ZoneInfo(self.tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"checkin.tz {self.tz!r} is not an IANA time zone (e.g. Europe/Berlin)"
            ) from None
        return self


class AgentConfig(_Strict):
    description: str = ""
    model: str = "default"
    sources: list[str] = []
    actions: list[str] = Field(min_length=1)
    triggers: list[str] = []
    watch: Watch | None = None
    # Routing: a stronger model for escalations (re-asks after invalid replies or denials) and
    # for summarizing long histories; the routine model decides everything else.
    escalation_model: str | None = None
    summary_model: str | None = None
    budget: Budget = Budget()
    policy: Policy = Policy()
    limits: Limits = Limits()
    checkin: Checkin = Checkin()
    build: BuildConfig = BuildConfig()
    notify: config_notify.AgentNotify = config_notify.AgentNotify()  # [agents.X.notify]


class McpConfig(_Strict):
    """[mcp]: agentd as an MCP server (`agentd mcp`)."""

    # An MCP client is often a model, which must never approve its own gated action: with this
    # on, an `approve` tool asks the person at the client through elicitation; off, none exists.
    approvals: bool = False


class Config(_Strict):
    daemon: DaemonConfig = DaemonConfig()
    mcp: McpConfig = McpConfig()
    api: ApiConfig = ApiConfig()
    web: WebConfig = WebConfig()
    models: dict[str, ModelConfig] = {}
    sources: dict[str, SourceConfig] = {}
    actions: dict[str, ActionConfig] = {}
    agents: dict[str, AgentConfig] = {}
    prices: dict[str, Price] = {}  # keyed by the model id the provider reports
    notify: dict[str, config_notify.NotifierConfig] = {}  # [notify.NAME]: channels

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
                    raise ValueError(
                        f"agents.{name}.actions names unknown action {act!r} "
                        f"(define [actions.{act}] or use one of {', '.join(BUILTIN_ACTIONS)})"
                    )
            if (deliver := agent.build.deliver) is not None and deliver not in agent.actions:
                raise ValueError(
                    f"agents.{name}.build.deliver names {deliver!r}, not in its actions"
                )
            for act in [*agent.policy.rules, *agent.policy.max_per_hour]:
                if act not in agent.actions:
                    raise ValueError(f"agents.{name}.policy names {act!r}, not in its actions")
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


class Paths:
    """Where one agentd home keeps its files."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / CONFIG_NAME
        self.db = home / DB_NAME
        self.lock = home / "agentd.lock"
        self.api_sock = home / "api.sock"  # the daemon's control API (mode 0600; db/poke.py)
        self.api_token = home / "api.token"  # the web inbox's login and the API's Bearer token


def default_home() -> Path:
    """`AGENTD_HOME`, else `$XDG_DATA_HOME/agentd`, else `~/.local/share/agentd`."""
    if env := os.environ.get("AGENTD_HOME"):
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "agentd"


SCRUBBED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER")


def base_env() -> dict[str, str]:
    """The environment commands and command sources start from: no secrets, just the basics."""
    env = {k: os.environ[k] for k in SCRUBBED_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def notify_socket() -> str | None:
    """systemd's notification socket, when running under `Type=notify`."""
    return os.environ.get("NOTIFY_SOCKET") or None


def watchdog_interval_s() -> float | None:
    """Half of systemd's WatchdogSec, when the unit sets one."""
    usec = os.environ.get("WATCHDOG_USEC")
    return int(usec) / 2e6 if usec and usec.isdigit() else None


def log_format() -> str:
    """`json` or `console`; AGENTD_LOG_FORMAT overrides the terminal-based default."""
    return os.environ.get("AGENTD_LOG_FORMAT", "")


def journal_stream() -> tuple[int, int] | None:
    """The device and inode systemd connected stdout/stderr to, when they go to the journal
    (`JOURNAL_STREAM=dev:ino`); a process compares them with its stream to know it is so."""
    dev, _, ino = os.environ.get("JOURNAL_STREAM", "").partition(":")
    return (int(dev), int(ino)) if dev.isdigit() and ino.isdigit() else None


def secret(env_name: str) -> str | None:
    """The value of a named secret; callers must never log or store it.

    A systemd credential of that name wins (`LoadCredential=ANTHROPIC_API_KEY:/etc/agentd/key`
    puts it in `$CREDENTIALS_DIRECTORY`, never in the process environment); else the variable.
    """
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if creds and "/" not in env_name and env_name not in ("", ".", ".."):
        try:
            return (Path(creds) / env_name).read_text().strip() or None
        except OSError:
            pass  # no credential of that name: fall back to the environment
    return os.environ.get(env_name) or None


def load(path: Path) -> Config:
    """Read and validate a config file; relative paths in it are relative to its folder."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no config file; run `agentd init` to write one") from None
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


def _line_of(text: str, loc: list[str]) -> int | None:
    """Best-effort line of a dotted key: its [table] header, then the key inside the table."""
    rows = text.splitlines()
    best: int | None = None
    for depth in range(len(loc), 0, -1):
        table, key = loc[: depth - 1], loc[depth - 1]
        header = re.compile(r"^\s*\[+\s*" + r"\s*\.\s*".join(map(re.escape, table)) + r"\s*\]+\s*$")
        start = 0
        if table:
            found = [i for i, r in enumerate(rows) if header.match(r)]
            if not found:
                continue
            start = found[0] + 1
            best = best or start
        key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
        sub_header = re.compile(
            r"^\s*\[+\s*" + r"\s*\.\s*".join(map(re.escape, [*table, key])) + r"\s*\]+\s*$"
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
