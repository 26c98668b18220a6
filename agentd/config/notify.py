"""Notifications in the config file: the channels (`[notify.NAME]`: a signed webhook, an ntfy
push, email over SMTP) and, per agent, which inbox items notify and how unanswered ones remind and
escalate (`[agents.X.notify]`). Validated at the edge like the rest (`agentd.config` uses these).

Secrets are named by environment variable (`secret_env`, `token_env`, `password_env`), never written.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentd.config.durations import duration_s, seconds_keys
from agentd.config.sources import http_url

CATEGORIES = ("approval", "question", "nudge", "notice", "failure")
Category = Literal["approval", "question", "nudge", "notice", "failure"]
PRIORITIES = ("min", "low", "default", "high", "urgent")  # ntfy's 1…5
Priority = Literal["min", "low", "default", "high", "urgent"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Strict(BaseModel):  # as config/actions.Strict (ruff sees a pydantic model here)
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)


def _env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits and _), never the "
            "secret itself"
        )
    return value


class ChannelBase(Strict):
    timeout_s: float = Field(10.0, gt=0, le=120)  # one delivery attempt, whole
    retry_base_s: float = Field(30.0, gt=0)  # first retry after this; doubles each failure
    retry_max_s: float = Field(3600.0, gt=0)  # backoff stops growing here
    give_up_after_s: float = Field(3 * 86400.0, gt=0)  # then the message is marked failed
    # In the goal's quiet hours an approval, a failure or a question a run waits on pages at once ("send")
    # or waits for their end like nudges and notices ("hold"); either way never past its expiry.
    urgent_in_quiet_hours: Literal["send", "hold"] = "send"

    _durations = field_validator("retry_base_s", "retry_max_s", "give_up_after_s", mode="before")(
        duration_s
    )


class WebhookNotify(ChannelBase):
    """A JSON POST signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`)."""

    type: Literal["webhook"]
    url: str
    secret_env: str | None = None  # holds the signing secret, `whsec_<base64>`; unsigned if unset

    _url = field_validator("url")(http_url)
    _secret = field_validator("secret_env")(_env_name)


class NtfyNotify(ChannelBase):
    """An ntfy push (JSON publish to the server root): title, priority, tags, a click URL."""

    type: Literal["ntfy"]
    url: str = "https://ntfy.sh"  # the ntfy server
    topic: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    token_env: str | None = None  # an access token (Bearer), for a protected topic

    _url = field_validator("url")(http_url)
    _token = field_validator("token_env")(_env_name)


class EmailNotify(ChannelBase):
    """Mail over SMTP: TLS (`tls`: STARTTLS on 587, implicit TLS on 465, or none for a loopback
    relay only), then login by a named secret."""

    type: Literal["email"]
    host: str
    port: int = Field(587, ge=1, le=65535)
    sender: str = Field(alias="from", min_length=3)
    to: list[str] = Field(min_length=1)
    # "starttls": plain connect, then STARTTLS before anything else (port 587); "implicit": TLS from
    # the first byte (port 465); "none": no TLS, only to a relay on this machine.
    tls: Literal["starttls", "implicit", "none"] = "starttls"
    username: str | None = None
    # Holds the SMTP password; goes with username. Validated when absent too (username alone).
    password_env: str | None = Field(None, validate_default=True)
    ca_file: Path | None = None  # trust this CA for TLS (a private relay); default: the system's

    @model_validator(mode="before")
    @classmethod
    def _port_follows_tls(cls, data: Any) -> Any:
        """No `port`: 465 for implicit TLS, else 587 (a TLS handshake on 587 would never work)."""
        if isinstance(data, dict) and "port" not in data:
            return {**data, "port": 465 if data.get("tls") == "implicit" else 587}
        return data

    @field_validator("tls")
    @classmethod
    def _plain_only_on_loopback(cls, tls: str, info: ValidationInfo) -> str:
        # Fields validate in order: `host` is known here (absent only when itself invalid).
        host = info.data.get("host")
        if tls == "none" and host is not None and not is_loopback(host):
            raise ValueError(
                f'"none" sends mail and any login unencrypted, so it is only for a relay on this '
                f'machine (host = "127.0.0.1", "::1" or "localhost"); for {host!r} write '
                'tls = "starttls" (port 587) or tls = "implicit" (port 465)'
            )
        return tls

    @field_validator("password_env")
    @classmethod
    def _login(cls, password_env: str | None, info: ValidationInfo) -> str | None:
        username, tls = info.data.get("username"), info.data.get("tls")
        if password_env is None and username is not None:
            raise ValueError(
                "username needs password_env: the NAME of the variable holding the password"
            )
        if password_env is not None and username is None:
            raise ValueError("password_env needs username (the SMTP login)")
        if password_env is not None and tls == "none":
            raise ValueError('a password is only sent over TLS: set tls = "starttls" or "implicit"')
        return _env_name(password_env)


def is_loopback(host: str) -> bool:
    """`host` names this machine: localhost, or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


NotifierConfig = Annotated[WebhookNotify | NtfyNotify | EmailNotify, Field(discriminator="type")]


class AgentNotify(Strict):
    """[agents.X.notify]: which of the agent's inbox items notify, where, and the reminders."""

    channels: list[str] = []  # names of [notify.NAME] tables
    on: list[Category] = ["approval", "question", "failure"]  # failure: a run finished failed
    # Unanswered approvals and questions remind, counted from the first message (quiet hours that
    # hold a message back move the item's later reminders and escalation by as much).
    remind_after: list[float] = []
    # After this long unanswered, one last message at urgent priority to `escalate_to` (default:
    # the same channels).
    escalate_after: float | None = None
    escalate_to: list[str] = []
    # The goal's check-in quiet hours hold nudges and notices back (approvals, failures and
    # blocking questions too on a channel with urgent_in_quiet_hours = "hold"); false: none.
    hold_in_quiet_hours: bool = True

    _durations = field_validator("remind_after", mode="before")(
        lambda v: [duration_s(x) for x in v] if isinstance(v, list) else v
    )
    _escalate = field_validator("escalate_after", mode="before")(
        lambda v: None if v is None else duration_s(v)
    )
    _to_list = field_validator("escalate_to", mode="before")(
        lambda v: [v] if isinstance(v, str) else v
    )

    @model_validator(mode="after")
    def _coherent(self) -> AgentNotify:
        if sorted(self.remind_after) != self.remind_after:
            raise ValueError("remind_after must be in increasing order, e.g. ['1h', '4h', '24h']")
        if self.escalate_to and self.escalate_after is None:
            raise ValueError("escalate_to needs escalate_after (how long unanswered, e.g. '24h')")
        return self

    def names(self) -> list[str]:
        return [*self.channels, *(c for c in self.escalate_to if c not in self.channels)]


def check_channels(rules: dict[str, AgentNotify], channels: Mapping[str, object]) -> None:
    """Every channel an agent names is a [notify.NAME] table."""
    for agent, notify in rules.items():
        for channel in notify.names():
            if channel not in channels:
                raise ValueError(
                    f"agents.{agent}.notify.channels names channel {channel!r}: define [notify.{channel}]"
                )
