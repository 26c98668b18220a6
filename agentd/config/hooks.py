"""Inbound webhooks in the config file: `[hooks.NAME]`, each served at `POST /hooks/NAME` on the
`[api] port` (agentd/hooks/). A hook names how its sender proves itself — `token_env` (a bearer
token) and/or `secret_env` (a signing secret: Standard Webhooks `whsec_…` for `json`, GitHub's
webhook secret for `github`) — by variable or systemd credential, never the value; a hook with no
way to authenticate is a config error, not an open door. `token = "{secret:NAME}"` and
`secret = "{secret:NAME}"` say the same as `token_env` / `secret_env` = "NAME".
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentd.config.actions import SECRET_PLACEHOLDER

HOOK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")  # a URL path segment and an event prefix
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
HookType = Literal["alertmanager", "github", "json"]


class HookConfig(BaseModel):
    """[hooks.NAME]: one inbound webhook."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: HookType
    # The variable (or systemd credential) holding a bearer token the sender puts in
    # `Authorization: Bearer …` (Alertmanager's `http_config.authorization`).
    token_env: str | None = None
    # The variable holding the signing secret (github: the webhook's secret; json: `whsec_…`).
    secret_env: str | None = None
    # Event names: alertmanager `{hook}.firing` / `{hook}.resolved`; github `{hook}.{X-GitHub-Event}`;
    # json: `event`, or the top-level string field `event_field` names, else `{hook}`.
    firing_event: str | None = None
    resolved_event: str | None = None
    event: str | None = None
    event_field: str | None = None
    # A body over this is refused (413) before it is read (declared) or as soon as it passes.
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=16 * 1024 * 1024)
    # Deliveries a minute this hook accepts from all senders together; past it: 429.
    rate_per_minute: int = Field(600, ge=1, le=1_000_000)
    # Standard Webhooks: a `webhook-timestamp` further than this from now is refused (replay).
    tolerance_s: float = Field(300.0, gt=0, le=3600)

    @model_validator(mode="before")
    @classmethod
    def _placeholders(cls, data: Any) -> Any:
        """`token = "{secret:NAME}"` / `secret = "{secret:NAME}"`, as secrets are named elsewhere
        in config.toml, mean `token_env = "NAME"` / `secret_env = "NAME"`; never a value."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("token", "secret"):
            if key not in data:
                continue
            given = data.pop(key)
            match = SECRET_PLACEHOLDER.fullmatch(given) if isinstance(given, str) else None
            if match is None:
                raise ValueError(
                    f'{key} names a secret, never holds it: {key} = "{{secret:NAME}}" (or '
                    f'{key}_env = "NAME"), NAME a variable or systemd credential of the daemon'
                )
            if data.get(f"{key}_env") not in (None, match.group(1)):
                raise ValueError(f"{key} and {key}_env name two secrets: keep one")
            data[f"{key}_env"] = match.group(1)
        return data

    @model_validator(mode="after")
    def _can_authenticate(self) -> HookConfig:
        for key in ("token_env", "secret_env"):
            value = getattr(self, key)
            if value is not None and not _ENV_NAME.fullmatch(value):
                raise ValueError(f'{key} names a variable, e.g. {key} = "ALERTS_TOKEN"')
        if self.token_env is None and self.secret_env is None:
            raise ValueError(
                "a hook needs a way to authenticate its sender: token_env (a bearer token) "
                "and/or secret_env (a signing secret), each naming a variable or credential"
            )
        if self.type == "alertmanager" and self.secret_env is not None:
            raise ValueError(
                "Alertmanager does not sign its webhooks: use token_env (its "
                "http_config.authorization credentials) instead of secret_env"
            )
        if self.type == "github" and self.secret_env is None:
            raise ValueError(
                "a github hook is verified with X-Hub-Signature-256: set secret_env to the "
                "variable holding the webhook's secret"
            )
        for key in ("firing_event", "resolved_event", "event"):
            value = getattr(self, key)
            if value is not None and not _EVENT_NAME.fullmatch(value):
                raise ValueError(f"{key} {value!r} is not an event name (letters, digits, _.:-)")
        if (self.event is not None or self.event_field is not None) and self.type != "json":
            raise ValueError("event and event_field are for a json hook")
        if (self.firing_event or self.resolved_event) and self.type != "alertmanager":
            raise ValueError("firing_event and resolved_event are for an alertmanager hook")
        return self

    def secret_names(self) -> list[str]:
        return sorted({n for n in (self.token_env, self.secret_env) if n is not None})


def check_names(hooks: dict[str, HookConfig]) -> None:
    for name in hooks:
        if not HOOK_NAME.fullmatch(name):
            raise ValueError(
                f"hooks.{name}: a hook's name is its URL (/hooks/NAME): lowercase letters, "
                "digits, _ and -, starting with a letter or digit"
            )
