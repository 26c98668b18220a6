"""The alert shown with an approval is cut (review of issue 29): a sender may put 50,000 labels
or a megabyte of summary in one alert (within the hook's body limit); the evidence (CLI, web
page, JSON API, notification) shows 20 labels of at most 200 characters and 500 of the summary,
where the first version copied them whole into every page and API answer."""

from __future__ import annotations

from datetime import UTC, datetime

from agentd.models import Step, StepKind, StepStatus
from agentd.views import evidence as ev
from agentd.web import evidence_html

AT = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)


def test_hooks_the_starting_alert_is_cut_in_the_evidence() -> None:
    huge = {
        "status": "firing", "alertname": "A" * 100_000, "startsAt": "2026-12-07T02:59:00Z",
        "labels": {f"l{n:05}": "v" * 5000 for n in range(50_000)},
        "annotations": {"summary": "s" * 1_000_000},
    }  # fmt: skip
    data = {"event": "am.firing", "event_id": 7, "data": huge}
    shown = ev.summary({}, [Step(1, 1, StepKind.START, StepStatus.DONE, data, AT, AT)])
    started = shown["started_by"]
    assert len(started["labels"]) == 20
    assert all(len(v) == 200 for v in started["labels"].values())
    assert len(started["alert"]) == 200 and len(started["summary"]) == 500
    assert len(evidence_html.summary(shown, AT)) < 10_000
    assert len("\n".join(ev.lines(shown, AT))) < 10_000
