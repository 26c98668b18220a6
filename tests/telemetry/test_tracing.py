"""Traces reach a real OTLP/HTTP receiver (decoded with opentelemetry-proto): one run's spans form
one trace — the run's root, a span per step under it, model-call (GenAI) and action spans under
their steps, no prompt text; the step resumed after an approval links to the wait. With the
collector down the run completes as before and one warning is logged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.telemetry.homes import MetricsHome
from tests.telemetry.otlp_receiver import Receiver
from tests.telemetry.prom_server import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.stop()


def _home(tmp_path: Path, endpoint: str) -> MetricsHome:
    tracing = f'[tracing]\nenabled = true\nendpoint = "{endpoint}"\ntimeout_s = 2\n\n'
    return MetricsHome(tmp_path / "home", tables=tracing)


def _run_with_approval(home: MetricsHome, nth: int = 1) -> None:
    """A run of a new goal: it asks to append, the operator approves, it appends and finishes."""
    goal_id = home.cli("goal", "add", f"Traced goal {nth}", "--why", "tests", "--agent", "default")
    home.cli("runs", "start", goal_id.strip())
    items = home.until("the approval", lambda: [
        i for i in json.loads(home.cli("inbox", "list", "--json")) if i["kind"] == "approval"
    ])  # fmt: skip
    home.cli("inbox", "approve", str(items[0]["item_id"]))
    home.until(f"run {nth} to finish",
               lambda: home.cli("runs", "list", "--json").count('"succeeded"') == nth)  # fmt: skip


def test_one_run_is_one_trace_with_step_model_and_action_spans(
    tmp_path: Path, receiver: Receiver
) -> None:
    home = _home(tmp_path, receiver.url)
    try:
        home.serve()
        _run_with_approval(home)
        root = home.until("the run's root span",
                          lambda: next((s for s in receiver.spans if s["name"] == "run"), None))  # fmt: skip
    finally:
        home.stop()
    spans = receiver.spans
    assert {s["trace_id"] for s in spans} == {root["trace_id"]}  # one trace
    assert root["parent"] == "" and root["attributes"]["agentd.run.status"] == "succeeded"
    assert root["service"] == "agentd"
    steps = [s for s in spans if s["name"].startswith("step ")]
    assert {s["parent"] for s in steps} == {root["span_id"]}
    names = {s["name"] for s in steps}
    assert {"step observe", "step decide", "step check", "step act"} <= names, names
    by_id = {s["span_id"]: s for s in spans}
    chats = [s for s in spans if s["name"] == "chat default"]
    assert len(chats) == 2
    for chat in chats:
        assert by_id[chat["parent"]]["name"] == "step decide"
        attrs = chat["attributes"]
        assert (
            attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.request.model"] == "default"
        )
        assert "gen_ai.input.messages" not in attrs  # no prompt text unless the operator opts in
    (action,) = [s for s in spans if s["name"] == "action append"]
    assert by_id[action["parent"]]["name"] == "step act"
    assert all(s["attributes"].get("agentd.run_id") == root["attributes"]["agentd.run_id"]
               for s in steps)  # fmt: skip
    waits = [s for s in steps if s["name"] == "step wait"]
    resumed = [s for s in steps if s["links"]]
    assert waits and resumed, names
    assert resumed[0]["links"][0] == (root["trace_id"], waits[0]["span_id"])


def test_a_dead_collector_slows_no_step_and_warns_once(tmp_path: Path) -> None:
    home = _home(tmp_path, f"http://127.0.0.1:{free_port()}/v1/traces")  # nobody listens
    try:
        home.serve()
        _run_with_approval(home)
        home.until("the export failure", lambda: '"tracing.export_failed"' in home.log())
        _run_with_approval(home, 2)  # the outage goes on: this run's spans are dropped too
        home.until(
            "the spans dropped", lambda: "agentd_trace_spans_dropped_total 0" not in home.get().text
        )
        body = home.get().text
    finally:
        home.stop()
    assert home.log().count('"tracing.export_failed"') == 1
    dropped = [ln for ln in body.splitlines() if ln.startswith("agentd_trace_spans_dropped_total ")]
    assert dropped and float(dropped[0].split()[1]) > 0
