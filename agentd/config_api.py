"""The `[api]` and `[web]` tables: the daemon's local control API and the web inbox.

The API always listens on the unix socket `api.sock` in the home (mode 0600); `[api] port`
adds a listener on 127.0.0.1 (loopback only: reach it from elsewhere through an SSH tunnel).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_WEB_PORT = 8765  # the loopback port of the web inbox when `[web] enabled` names none


class ApiConfig(BaseModel):
    """[api]: the local control API (`/api/...`, `POST /poke`) inside `agentd serve`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Also listen on 127.0.0.1:port (HTTP, loopback only); None: the unix socket alone.
    port: int | None = Field(None, ge=1, le=65535)
    # With the API up, the CLI pokes the daemon after each write, so the database scan is only a
    # safety net for a poke that was lost (a write by another tool): seconds between scans.
    safety_scan_s: float = Field(5.0, gt=0, le=60)


class WebConfig(BaseModel):
    """[web]: the web inbox, served by the API's listeners (`agentd web` prints a login URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False  # true: pages on 127.0.0.1 ([api] port, else DEFAULT_WEB_PORT)

    def port(self, api: ApiConfig) -> int | None:
        """The loopback port the pages are served on, or None when only the socket listens."""
        if api.port is not None:
            return api.port
        return DEFAULT_WEB_PORT if self.enabled else None
