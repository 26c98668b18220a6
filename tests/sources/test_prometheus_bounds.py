"""A prometheus query with both `above` and `below` judges every series against both: the lowest
series under `below` breaches even when the highest is within `above` (it was judged by the
highest only)."""

from __future__ import annotations

from agentd.sources.prometheus import PrometheusReader
from tests.sources.test_prometheus_reader import _answer, _cfg, _series


async def test_a_series_under_below_breaches_beside_one_within_above() -> None:
    cfg = _cfg(above=100, below=1)
    seen = await PrometheusReader("p", cfg, _answer(_series("0.5", "50"))).observe()
    assert seen["ok"] is False and seen["breached"] == ["q"]
    assert seen["readings"][0]["value"] == 0.5
    calm = await PrometheusReader("p", cfg, _answer(_series("5", "50"))).observe()
    assert calm["ok"] is True and calm["readings"][0]["value"] == 50
    high = await PrometheusReader("p", cfg, _answer(_series("0.5", "500"))).observe()
    assert high["ok"] is False and high["readings"][0]["value"] == 500
