"""`[sources.NAME] type = "prometheus"`: PromQL instant queries against a Prometheus server, each
with a threshold; the source is unhealthy while any query is past its threshold (agentd/sources/
prometheus.py reads it; docs/observability.md shows an error-rate watch)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from agentd.config.actions import Strict as _Strict
from agentd.config.actions import http_url


class PromQuery(_Strict):
    """One instant query and when it is bad: `above` (value > above) and/or `below` (value <
    below). A vector of several series is judged by its worst series (the highest for `above`,
    the lowest for `below`); no series or NaN is `no_data`, judged by `no_data`."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    query: str = Field(min_length=1, max_length=4000)
    above: float | None = None
    below: float | None = None
    no_data: Literal["healthy", "unhealthy"] = "healthy"  # no traffic, no error rate: calm

    @model_validator(mode="after")
    def _has_threshold(self) -> PromQuery:
        if self.above is None and self.below is None:
            raise ValueError(f"query {self.name!r} needs a threshold: above = N or below = N")
        for bound in (self.above, self.below):
            if bound is not None and not math.isfinite(bound):
                raise ValueError(f"query {self.name!r}: a threshold must be a finite number")
        return self

    def threshold(self) -> str:
        """`> 0.05`, `< 10`, or both joined by `or`: what the snapshot shows beside the value."""
        parts = [f"> {self.above:g}"] if self.above is not None else []
        parts += [f"< {self.below:g}"] if self.below is not None else []
        return " or ".join(parts)


class PrometheusSource(_Strict):
    type: Literal["prometheus"]
    url: str  # the server's base URL: http://127.0.0.1:9090 (its /api/v1/query is asked)
    queries: list[PromQuery] = Field(min_length=1, max_length=50)
    timeout_s: float = Field(5.0, gt=0, le=60)
    token_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # Bearer, if any

    _url_is_requestable = field_validator("url")(http_url)

    @model_validator(mode="after")
    def _names_unique(self) -> PrometheusSource:
        names = [q.name for q in self.queries]
        if len(names) != len(set(names)):
            raise ValueError("each query needs its own name")
        return self
