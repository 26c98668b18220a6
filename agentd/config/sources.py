"""The source part of the config file: what an agent observes (`[sources.NAME]`), how it watches
between runs (`[agents.X.watch]`), and the states a watched source is in. Validated at the edge like
the rest of the config (`agentd.config` re-exports every name here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from agentd.config.actions import McpServerRef, program_argv
from agentd.config.actions import Strict as _Strict
from agentd.config.actions import http_url as http_url  # re-exported: it lived here
from agentd.config.mail import ImapSource
from agentd.config.promql import PrometheusSource

# The states a source with health is in; a watching agent emits `SOURCE.STATE` when one begins.
HEALTHY, UNHEALTHY, CHECK_FAILED = "healthy", "unhealthy", "check_failed"
SOURCE_STATES = (HEALTHY, UNHEALTHY, CHECK_FAILED)
# What an imap source emits on its own, watched or not: a new message, a recreated mailbox.
MAIL_EVENTS = ("received", "reset")


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


class McpSource(McpServerRef):
    """Read an MCP server's resources (by URI) and call its read-only tools (name → fixed
    arguments) on each look. What they return is world state (JSON when it parses, else text),
    cut to `max_bytes` in all. A look that cannot be made (the server does not start or answer,
    a read fails, a tool is not marked read-only) is `check_failed`: it says nothing of the
    world, and a watch emits `SOURCE.check_failed`."""

    type: Literal["mcp"]
    resources: list[str] = Field(default_factory=list)
    tools: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name → fixed arguments
    max_bytes: int = Field(8000, ge=1)

    @model_validator(mode="after")
    def _reads_something(self) -> McpSource:
        if not self.resources and not self.tools:
            raise ValueError(
                'name what to read: resources = ["app://..."] and/or '
                "tools = { TOOL = { ARG = VALUE } } (tools the server marks read-only)"
            )
        if any(not uri.strip() or "\0" in uri for uri in self.resources):
            raise ValueError('resources: each is a resource URI, e.g. "jobsearch://roles"')
        return self


SourceConfig = Annotated[
    HttpSource | CommandSource | FileTailSource | McpSource | PrometheusSource | ImapSource,
    Field(discriminator="type"),
]


class Watch(_Strict):
    """Look at the agent's sources between runs. Each change of a source's state becomes an
    event (`SOURCE.unhealthy`, `SOURCE.healthy`, `SOURCE.check_failed`); a health flip wakes the
    agent's waiting runs; a trigger naming a state starts runs while it holds (once per
    episode: see `agentd.daemon.scheduler`)."""

    interval_s: float = Field(10.0, gt=0)
    wake_runs: bool = True  # a flip wakes waiting runs and withdraws what they wait on
