"""[store]: where the home keeps its state. Without it, the SQLite file `agentd.db` in the home (the
embedded default); with `url` (or `url_env`, the name of a variable or systemd credential holding
it), one PostgreSQL database several daemons share (docs/scale-out.md).

config/where.py reads only this table, so every command finds its database without paying for the
whole config; `agentd serve` and `agentd doctor` validate it with the rest.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentd.config.durations import seconds_keys
from agentd.config.where import SCHEMES


class StoreConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)

    url: str | None = None  # postgresql://user@host/db (a password belongs in url_env)
    url_env: str | None = None  # a variable or systemd credential holding the URL
    # PostgreSQL only: how long a daemon's hold on a run lasts without renewal (database clock).
    # A daemon renews every third of it and stops its runs itself (killing their commands)
    # when it could not renew in time; another daemon takes them over once it has lapsed.
    lease_s: float = Field(30.0, ge=2, le=3600)
    # PostgreSQL only: LISTEN for the commits of the CLI and of other daemons (an answer, an
    # event) and look at once; without it a daemon notices them at its safety scan
    # ([api] safety_scan_s). `listen_url`: a direct connection for LISTEN when `url` goes
    # through a pooler in transaction mode, which breaks LISTEN (read like `url`).
    listen: bool = True
    listen_url: str | None = None

    @model_validator(mode="after")
    def _one_url(self) -> StoreConfig:
        if self.url is not None and self.url_env is not None:
            raise ValueError("set url or url_env, not both")
        if self.listen_url is not None and not self.listen_url.startswith(SCHEMES):
            raise ValueError("listen_url must start with postgresql://")
        if self.url is not None and not self.url.startswith(SCHEMES):
            raise ValueError(
                f"url must start with postgresql:// (got {self.url.split(':', 1)[0]!r}); "
                "leave [store] out for the SQLite file in the home"
            )
        return self
