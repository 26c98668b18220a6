"""The metrics tests' Prometheus: one server per test session (per xdist worker), started the first
time a test asks for it, stopped at the end. Where Debian's `prometheus` is missing the tests are
skipped with the reason and a banner at the end of the run (tests/servers.py); under
AGENTD_REQUIRE_PROMETHEUS=1 (set by `.ci/run`) they fail instead."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import servers
from tests.telemetry.homes import MetricsHome
from tests.telemetry.prom_server import Prometheus, missing_reason

BANNER_MARK = "PROMETHEUS TEST SKIPPED"
RULES = Path(__file__).parents[2] / "contrib" / "prometheus" / "agentd-rules.yml"


def require_prometheus() -> None:
    servers.require(missing_reason(), "PROMETHEUS")


@pytest.fixture(scope="session")
def prometheus() -> Iterator[Prometheus]:
    """This test process's running Prometheus, evaluating the shipped rules."""
    require_prometheus()
    server = Prometheus.start([RULES])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[MetricsHome]:
    """A home serving /metrics on a port of its own (tests/telemetry/homes.py), stopped after."""
    h = MetricsHome(tmp_path / "home")
    try:
        yield h
    finally:
        h.stop()
