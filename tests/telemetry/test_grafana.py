"""contrib/grafana/agentd.json: every metric its queries name is one a real daemon exports (its
HELP line is in a scrape of `GET /metrics`), and every query parses as PromQL (promtool)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.telemetry.homes import MetricsHome

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
DASHBOARD = Path(__file__).parents[2] / "contrib" / "grafana" / "agentd.json"
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def dashboard_exprs() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p["targets"]]


def named_metrics(expr: str) -> set[str]:
    """The agentd metrics a query names, without a counter's or histogram's series suffix."""
    names = set()
    for name in re.findall(r"\bagentd_[a-z0-9_]+", expr):
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                name = name.removesuffix(suffix)
                break
        names.add(name)
    return names


def test_every_metric_the_dashboard_names_is_exported(home: MetricsHome) -> None:
    home.serve()
    body = home.get().text
    exported = set(re.findall(r"^# HELP (\S+) ", body, re.M))
    exported |= {n.removesuffix("_total") for n in exported}
    named = set().union(*(named_metrics(e) for e in dashboard_exprs()))
    assert len(named) >= 20  # the dashboard covers the list
    missing = sorted(named - exported)
    assert not missing, f"the dashboard names metrics the daemon does not export: {missing}"


def test_dashboard_queries_name_no_label_the_daemon_never_sets() -> None:
    """A panel grouped by a label the metric does not have shows one unlabelled line: the labels
    used are those docs/observability.md lists."""
    allowed = {"le", "status", "kind", "agent", "model", "provider", "outcome", "action",
               "direction", "channel", "instance", "job", "purpose"}  # fmt: skip
    for expr in dashboard_exprs():
        for group in re.findall(r"by \(([^)]*)\)", expr):
            labels = {x.strip() for x in group.split(",")}
            assert labels <= allowed, (expr, labels - allowed)
