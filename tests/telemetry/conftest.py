"""The metrics tests' Prometheus: one server per test session (per xdist worker), started the first
time a test asks for it, stopped at the end. Where Debian's `prometheus` is missing the tests are
skipped with the reason and a banner at the end of the run; under AGENTD_REQUIRE_PROMETHEUS=1 (set
by `.ci/run`) they fail instead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.telemetry.homes import MetricsHome
from tests.telemetry.prom_server import Prometheus, missing_reason

BANNER_MARK = "PROMETHEUS TEST SKIPPED"
RULES = Path(__file__).parents[2] / "contrib" / "prometheus" / "agentd-rules.yml"


def require_prometheus() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("AGENTD_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(
            reason.replace("SKIPPED", "FAILED (AGENTD_REQUIRE_PROMETHEUS=1)"), pytrace=False
        )
    pytest.skip(reason)


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner a skipped Prometheus test cannot hide behind (as tests/postgres.py's)."""
    count = 0
    reason = ""
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if BANNER_MARK in text:
            count += 1
            reason = text[text.index(BANNER_MARK) :]
    if count:
        terminalreporter.write_sep("!", f"{count} Prometheus test(s) skipped", red=True, bold=True)
        terminalreporter.write_line(reason, red=True, bold=True)
