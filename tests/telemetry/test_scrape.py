"""Prometheus (Debian's, a real server) scrapes a real daemon after a scripted scenario — one
approval, one action, one check-in — and sees the metrics the issue names with sane values."""

from __future__ import annotations

import json

import pytest

from tests.telemetry.homes import TITLE, MetricsHome
from tests.telemetry.prom_server import Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def value(prom: Prometheus, promql: str) -> float:
    found = prom.query(promql)
    return float(found[0]["value"][1]) if found else float("nan")


def test_prometheus_scrapes_a_daemon_after_an_approval_an_action_and_a_checkin(
    home: MetricsHome, prometheus: Prometheus
) -> None:
    home.serve()
    goal_id = home.cli("goal", "add", TITLE, "--why", "tests", "--agent", "default").strip()
    home.cli("goal", "schedule", goal_id, "--every", "1s")
    home.cli("runs", "start", goal_id)
    items = home.until("the approval", lambda: json.loads(home.cli("inbox", "list", "--json")))
    prometheus.scrape("scenario", home.port)
    target = 'target="scenario"'
    # While it waits: one open approval, with an age.
    home.until("a scrape with the open approval",
               lambda: value(prometheus, f"agentd_approvals_open{{{target}}}") == 1)  # fmt: skip
    assert value(prometheus, f"agentd_approval_oldest_age_seconds{{{target}}}") >= 0
    home.cli("inbox", "approve", str(items[0]["item_id"]))
    home.until("the run to finish", lambda: (home.root / "appended.txt").exists()
               and "succeeded" in home.cli("runs", "list", "--json"))  # fmt: skip
    home.until("a check-in the model decided", lambda: any(
        c["status"] == "done" for c in json.loads(home.cli("checkins", "--json"))
    ))  # fmt: skip
    home.until(
        "a scrape after the run",
        lambda: (
            value(prometheus, f'agentd_runs{{{target},status="succeeded",agent="default"}}') == 1
            and value(prometheus, f'agentd_checkins_total{{{target},status="done"}}') >= 1
        ),
    )
    assert prometheus.targets()[0]["health"] == "up"
    assert value(prometheus, f"agentd_approvals_open{{{target}}}") == 0
    assert value(prometheus, f'agentd_actions_total{{{target},action="append",outcome="ok"}}') == 1
    assert value(prometheus, f'agentd_steps_total{{{target},kind="act",outcome="done"}}') == 1
    assert (
        value(prometheus, f'sum(agentd_model_calls_total{{{target},model="default",outcome="ok"}})')
        == 2
    )
    assert (
        value(prometheus, f'agentd_model_call_duration_seconds_count{{{target},model="default"}}')
        == 2
    )
    assert value(prometheus, f"agentd_approval_decision_seconds_count{{{target}}}") == 1
    assert value(prometheus, f"agentd_commit_to_action_seconds_count{{{target}}}") == 1
    assert value(prometheus, f"agentd_store_commits_total{{{target}}}") >= 1
    assert value(prometheus, f"agentd_store_writes_total{{{target}}}") >= value(
        prometheus, f"agentd_store_commits_total{{{target}}}"
    )
    assert value(prometheus, f"agentd_home_exporter{{{target}}}") == 1
    assert value(prometheus, f'agentd_daemon_info{{{target},store="sqlite"}}') == 1
    # No label anywhere carries the goal's title.
    body = home.get().text
    assert "Zanzibar" not in body
