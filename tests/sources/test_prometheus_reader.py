"""The prometheus source's judgement of Prometheus's answers (httpx.MockTransport: the narrowest
seam): worst series against `above`/`below`, no data, a refused query and an unreachable server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agentd.config import PrometheusSource
from agentd.sources.prometheus import PrometheusReader


def _cfg(**query: Any) -> PrometheusSource:
    q = {"name": "q", "query": "up", **query}
    return PrometheusSource(type="prometheus", url="http://prom.test:9090", queries=[q])


def _answer(result: Any, kind: str = "vector", status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query"
        body = {"status": "success", "data": {"resultType": kind, "result": result}}
        if status != 200:
            body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
        return httpx.Response(status, content=json.dumps(body))

    return httpx.MockTransport(handle)


def _series(*values: str) -> list[Any]:
    return [{"metric": {"i": str(n)}, "value": [1.0, v]} for n, v in enumerate(values)]


async def test_the_worst_series_past_above_is_unhealthy() -> None:
    seen = await PrometheusReader("p", _cfg(above=0.5), _answer(_series("0.1", "0.9"))).observe()
    assert seen["ok"] is False and seen["breached"] == ["q"]
    assert seen["readings"][0] == {"name": "q", "query": "up", "value": 0.9, "threshold": "> 0.5",
                                   "breached": True}  # fmt: skip


async def test_below_judges_the_lowest_series() -> None:
    seen = await PrometheusReader("p", _cfg(below=1), _answer(_series("1", "3"))).observe()
    assert seen["ok"] is True and seen["readings"][0]["value"] == 1.0


async def test_no_series_or_nan_is_no_data_judged_by_its_setting() -> None:
    calm = await PrometheusReader("p", _cfg(above=1), _answer(_series("NaN"))).observe()
    assert calm["ok"] is True and calm["readings"][0]["no_data"] is True
    strict = PrometheusReader("p", _cfg(above=1, no_data="unhealthy"), _answer([]))
    assert (await strict.observe())["ok"] is False


async def test_a_refused_query_is_a_failed_check_with_prometheus_reason() -> None:
    seen = await PrometheusReader("p", _cfg(above=1), _answer([], status=400)).observe()
    assert seen["check_failed"] is True and "parse error at char 3" in seen["error"]


async def test_an_unreachable_prometheus_is_a_failed_check() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    seen = await PrometheusReader("p", _cfg(above=1), httpx.MockTransport(refuse)).observe()
    assert seen["check_failed"] is True and "did not answer" in seen["error"]


def test_a_query_without_a_threshold_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="needs a threshold"):
        _cfg()
