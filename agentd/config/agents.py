"""[agents.NAME]: what one kind of agent watches and may do, and how: its policy (allow, approve,
deny; expiry of what it asks), limits, budgets and check-in cadence.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentd.config import notify as config_notify
from agentd.config.build import BuildConfig
from agentd.config.durations import seconds_keys
from agentd.config.sources import Watch


class _Strict(BaseModel):  # as config/actions.Strict (ruff and pydantic see a model here)
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)


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
    # Failed model calls in a row (outage, timeout) before a run or build stops retrying and
    # asks the operator, like a refused request does at once.
    max_model_retries: int = Field(6, ge=1)
    # Notices and questions one run may post: at most this many per hour, and none that says
    # nearly what one of its earlier ones said (a dumb model repeats itself in other words).
    max_notices_per_hour: int = Field(3, ge=1)
    # A run that finishes "succeeded" while the state that started it still holds is recorded
    # as an unconfirmed success (failed); the watch starts a new run this long after.
    unconfirmed_cooldown_s: float = Field(300.0, ge=0)


class Budget(_Strict):
    """Spend limits per goal of this agent; when one is reached the goal's run stops, visibly."""

    goal_tokens: int | None = Field(None, ge=1)  # input + output tokens over the goal's life
    goal_usd: float | None = Field(None, gt=0)  # cost over the goal's life (needs [prices])
    day_tokens: int | None = Field(None, ge=1)  # per goal per UTC day
    day_usd: float | None = Field(None, gt=0)


_QUIET = re.compile(r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$", re.ASCII)


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
    # A new goal's first check-in: "skip" looks only when something moved (an idle watch goal
    # costs nothing); "ask" asks the model once anyway. A vague goal asks its clarifying question
    # either way. A source's first snapshot is a baseline, never a change.
    first_look: Literal["ask", "skip"] = "skip"

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
