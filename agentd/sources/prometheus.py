"""The prometheus source: PromQL instant queries against a Prometheus server's HTTP API, each
judged by its threshold. Unhealthy while any query is past its threshold; `check_failed` when
Prometheus cannot be asked or refuses a query (that says nothing of the service watched).

The snapshot: `ok`, `breached` (the names past their thresholds: a change here is news) and
`readings` (per query: the query, its value, the threshold; values move every look, so they are
not news by themselves). `with_history` adds `since`: when this state began.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx

from agentd import config
from agentd.config import PrometheusSource, PromQuery
from agentd.models import JSON

ERROR_CHARS = 300


class PrometheusReader:
    def __init__(
        self, name: str, cfg: PrometheusSource, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.transport = transport

    async def observe(self) -> JSON:
        headers = {"Accept": "application/json"}
        if self.cfg.token_env is not None:
            token = config.secret(self.cfg.token_env)
            if token is None:
                return _broken(f"token_env names {self.cfg.token_env}, which is not set")
            headers["Authorization"] = f"Bearer {token}"
        url = self.cfg.url.rstrip("/") + "/api/v1/query"
        async with httpx.AsyncClient(
            timeout=self.cfg.timeout_s, transport=self.transport, headers=headers
        ) as http:
            answers = await asyncio.gather(*(_ask(http, url, q) for q in self.cfg.queries))
        failed = [a["error"] for a in answers if "error" in a]
        if failed:
            return _broken(failed[0])
        readings = [_judged(q, a["value"]) for q, a in zip(self.cfg.queries, answers, strict=True)]
        breached = [r["name"] for r in readings if r["breached"]]
        return {"ok": not breached, "breached": breached, "readings": readings}


async def _ask(http: httpx.AsyncClient, url: str, q: PromQuery) -> JSON:
    """`{"value": float | None}` (None: no series, or NaN), or `{"error": why}`."""
    try:
        r = await http.get(url, params={"query": q.query})
        body: Any = r.json()
    except (httpx.HTTPError, ValueError) as e:
        return {
            "error": f"{q.name}: Prometheus at {url} did not answer: {type(e).__name__}: {e}"[
                :ERROR_CHARS
            ]
        }
    if not isinstance(body, dict) or body.get("status") != "success":
        why = body.get("error") if isinstance(body, dict) else None
        return {
            "error": f"{q.name}: Prometheus refused the query (HTTP {r.status_code}): {why}"[
                :ERROR_CHARS
            ]
        }
    return {"value": _worst(q, body.get("data") or {})}


def _worst(q: PromQuery, data: JSON) -> float | None:
    """The series that decides: the first past a threshold (with both `above` and `below`, a
    series under `below` counts even when another is the highest), else the highest for
    `above`, the lowest for `below`."""
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list):
        values = [_float(result[1])]
    elif kind == "vector" and isinstance(result, list):
        values = [_float(s.get("value", [0, "NaN"])[1]) for s in result]
    else:
        values = []
    found = [v for v in values if v is not None]
    if not found:
        return None
    high, low = max(found), min(found)
    if q.above is not None and high > q.above:
        return high
    if q.below is not None and low < q.below:
        return low
    return high if q.above is not None else low


def _float(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _judged(q: PromQuery, value: float | None) -> JSON:
    if value is None:
        breached = q.no_data == "unhealthy"
    else:
        breached = (q.above is not None and value > q.above) or (
            q.below is not None and value < q.below
        )
    reading: JSON = {"name": q.name, "query": q.query, "value": value, "threshold": q.threshold(),
                     "breached": breached}  # fmt: skip
    if value is None:
        reading["no_data"] = True
    return reading


def _broken(error: str) -> JSON:
    return {"ok": False, "check_failed": True, "error": error}
