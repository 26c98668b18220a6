"""The prometheus source against a real Prometheus scraping a little test service: while the
service's error rate stays under the threshold no run starts; when the test raises it past the
threshold, the watching agent's source turns unhealthy and a run of its goal starts. The snapshot
shows the query, the value, the threshold and since when."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import queries as q
from agentd.db import world
from agentd.db.store import SyncStore
from tests.telemetry.homes import FINISH, MetricsHome
from tests.telemetry.prom_server import Prometheus
from tests.telemetry.service import Service

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
ERROR_RATE = (
    'sum(rate(svc_requests_total{code="500",target="svc"}[3s]))'
    ' / sum(rate(svc_requests_total{target="svc"}[3s]))'
)


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def home(tmp_path: Path, prometheus: Prometheus) -> Iterator[MetricsHome]:
    h = MetricsHome(tmp_path / "home")
    text = (h.root / "config.toml").read_text()
    source = (
        f'[sources.errors]\ntype = "prometheus"\nurl = "{prometheus.url}"\n'
        f'queries = [{{ name = "error_rate", query = {json.dumps(ERROR_RATE)}, above = 0.2 }}]\n\n'
        '[agents.watcher]\nsources = ["errors"]\nactions = ["finish"]\n'
        'triggers = ["errors.unhealthy"]\nwatch = { interval_s = 0.3 }\n\n'
    )
    (h.root / "config.toml").write_text(text + "\n" + source)
    (h.root / "replies.json").write_text(json.dumps([FINISH] * 5))
    try:
        yield h
    finally:
        h.stop()


def _reading(store: SyncStore) -> dict[str, Any] | None:
    last = store.read(lambda c: world.last_snapshot(c, "watcher"))
    return None if last is None else last[1].get("errors")


def _runs(store: SyncStore) -> list[Any]:
    return store.read(lambda c: [r for r in q.list_runs(c, limit=100) if r.agent == "watcher"])


def test_error_rate_past_its_threshold_starts_a_run(
    home: MetricsHome, prometheus: Prometheus, service: Service
) -> None:
    home.serve()
    home.cli("goal", "add", "Keep the service healthy", "--why", "5xx", "--agent", "watcher")
    prometheus.scrape("svc", service.port)
    store = SyncStore(config.Paths(home.root).db)
    try:
        # Calm first: the query has a value (under the threshold) and nothing starts.
        calm = home.until("a calm reading", lambda: (r := _reading(store)) and r.get("readings")
                          and r["readings"][0]["value"] is not None and r)  # fmt: skip
        assert calm["ok"] is True and calm["readings"][0]["value"] <= 0.2
        assert _runs(store) == []
        service.error_share = 0.6
        runs = home.until("a run of the watcher", lambda: _runs(store))
        assert len(runs) == 1 and runs[0].trigger != "test"
        seen = _reading(store)
        assert seen is not None and seen["ok"] is False and seen["breached"] == ["error_rate"]
        reading = seen["readings"][0]
        assert reading["query"] == ERROR_RATE and reading["threshold"] == "> 0.2"
        assert reading["value"] > 0.2 and seen["since"].endswith("Z")
    finally:
        store.close()
