"""The `[api]` and `[web]` tables: the daemon's local control API and the web inbox.

The API always listens on the unix socket `api.sock` in the home (mode 0600); `[api] port`
adds a listener on 127.0.0.1 (loopback only: reach it from elsewhere through an SSH tunnel).
The pages are served only when `[web] enabled = true`, on every listener; without it both
listeners answer the JSON API, `/mcp` and (the socket) `POST /poke`, and a page is a 404:

| `[api] port` | `[web] enabled` | 127.0.0.1 listener                  | pages |
|--------------|-----------------|-------------------------------------|-------|
| unset        | false (default) | none (the socket alone)             | off   |
| unset        | true            | DEFAULT_WEB_PORT                    | on    |
| N            | false           | N: JSON API and /mcp only           | off   |
| N            | true            | N: pages, JSON API and /mcp         | on    |
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from agentd.config.durations import seconds_keys

DEFAULT_WEB_PORT = 8765  # the loopback port of the web inbox when `[api] port` names none


class ApiConfig(BaseModel):
    """[api]: the local control API (`/api/...`, `POST /poke`) inside `agentd serve`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)

    # Also listen on 127.0.0.1:port (HTTP, loopback only); None: the unix socket alone.
    port: int | None = Field(None, ge=1, le=65535)
    # With the API up, the CLI pokes the daemon after each write, so the database scan is only a
    # safety net for a poke that was lost (a write by another tool): seconds between scans.
    safety_scan_s: float = Field(5.0, gt=0, le=60)
    # Connections each listener (the unix socket, the port) holds at most, counted apart; past
    # it the oldest idle one is closed, or the new one refused (503). Never more than a quarter
    # of the daemon's open-file limit. Applies at the next start.
    max_connections: int = Field(64, ge=1, le=10000)
    # Seconds a client has to send its whole request (head and body) after connecting or after
    # the last answer on a kept-alive connection; then the connection is closed. Next start.
    request_timeout_s: float = Field(5.0, gt=0, le=300)

    def listen_port(self, web: WebConfig) -> int | None:
        """The loopback port the daemon listens on (the table in the module docstring), or None
        when only the unix socket listens."""
        return self.port if self.port is not None else web.port(self)


class WebConfig(BaseModel):
    """[web]: the web inbox, served by the API's listeners (`agentd web` prints a login URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # true: the pages are served ([api] port, else DEFAULT_WEB_PORT). Strict: a quoted "yes"
    # or 1 is a config error rather than a guess at what the operator meant.
    enabled: StrictBool = False

    def port(self, api: ApiConfig) -> int | None:
        """The loopback port the pages are served on, or None when the pages are off."""
        if not self.enabled:
            return None
        return api.port if api.port is not None else DEFAULT_WEB_PORT
