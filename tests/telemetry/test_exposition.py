"""The exposition carries no `*_created` series (they doubled every counter's and histogram's
series), and a check-in this daemon ends is counted by status, never a status it does not know."""

from __future__ import annotations

from agentd.telemetry import home
from agentd.telemetry.meter import Meter


def test_no_created_series_and_checkins_by_status() -> None:
    meter = Meter()
    meter.step("act", "done")
    meter.action("noop", "ok", 0.01)
    meter.model_call("scripted", "m", "decide", "ok", 0.2, 10, 5, 0.001)
    for status in ("skipped", "skipped", "done", "failed", "something new"):
        meter.checkin(status)
    body = home.render(meter, None).decode()
    assert "_created" not in body
    lines = set(body.splitlines())
    assert 'agentd_checkins_total{status="skipped"} 2.0' in lines
    assert 'agentd_checkins_total{status="done"} 1.0' in lines
    assert 'agentd_checkins_total{status="other"} 1.0' in lines
