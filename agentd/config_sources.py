"""The source part of the config file: what an agent observes (`[sources.NAME]`), how it watches
between runs (`[agents.X.watch]`), and the states a watched source is in. Validated at the edge like
the rest of the config (`agentd.config` re-exports every name here)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from agentd.config_actions import Strict as _Strict
from agentd.config_actions import program_argv

# The states a source with health is in; a watching agent emits `SOURCE.STATE` when one begins.
HEALTHY, UNHEALTHY, CHECK_FAILED = "healthy", "unhealthy", "check_failed"
SOURCE_STATES = (HEALTHY, UNHEALTHY, CHECK_FAILED)


def http_url(value: str | None) -> str | None:
    """A URL agentd can request: http or https, a host, a numeric port. A URL that cannot even
    be requested would otherwise look like an outage at every poll."""
    if value is None:
        return None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        raise ValueError(
            f"{value!r} is not an http(s) URL; write it as http://HOST[:PORT]/PATH, "
            'e.g. "http://127.0.0.1:8080/health"'
        )
    try:
        _ = parts.port  # raises for a port that is not a number in 0-65535
    except ValueError:
        raise ValueError(f"{value!r}: the port is not a number from 0 to 65535") from None
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r}: a URL has no spaces (write them as %20)")
    return value


class HttpSource(_Strict):
    type: Literal["http"]
    url: str
    method: Literal["GET", "HEAD"] = "GET"
    timeout_s: float = Field(5.0, gt=0)
    body_excerpt_bytes: int = Field(500, ge=0)

    _url_is_requestable = field_validator("url")(http_url)


class CommandSource(_Strict):
    type: Literal["command"]
    argv: list[str] = Field(min_length=1)
    timeout_s: float = Field(10.0, gt=0)
    output_bytes: int = Field(2000, ge=0)

    _program_is_fixed = field_validator("argv")(program_argv)


class FileTailSource(_Strict):
    type: Literal["file_tail"]
    path: Path  # relative to the config file's folder
    lines: int = Field(20, ge=1, le=1000)

    @field_validator("path", mode="before")
    @classmethod
    def _names_a_file(cls, value: object) -> object:
        if isinstance(value, str) and (not value.strip() or "\0" in value):
            raise ValueError('path must name a log file, e.g. "/var/log/checkout.log"')
        return value


SourceConfig = Annotated[HttpSource | CommandSource | FileTailSource, Field(discriminator="type")]


class Watch(_Strict):
    """Look at the agent's sources between runs. Each change of a source's state becomes an
    event (`SOURCE.unhealthy`, `SOURCE.healthy`, `SOURCE.check_failed`); a health flip wakes the
    agent's waiting runs; a trigger naming a state starts runs while it holds (once per
    episode: see `agentd.scheduler`)."""

    interval_s: float = Field(10.0, gt=0)
    wake_runs: bool = True  # a flip wakes waiting runs and withdraws what they wait on
