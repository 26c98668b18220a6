"""Each outage of a shared database is said, however soon after the last and however alike its
error (issue 31). The daemon's log throttle (agentd/log.py) held back a warning identical to one
logged within a minute — same event, same `error` — and a restart a few seconds after a reset
often fails the first connection with the very words of the first outage ("server closed the
connection unexpectedly"): the second `db.unreachable` was dropped, so a daemon riding out its
second outage said nothing at all (seen as tests/daemon/test_db_outage.py timing out, its thread
stacks all idle). The events said once per episode now always pass the throttle."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from agentd import log
from agentd.db.outage import Outage

ERROR = (
    "postgresql://agentd@db/agentd: connection failed: server closed the connection unexpectedly"
)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    log.configure("info", fmt="json", stream=stream)
    yield stream
    structlog.reset_defaults()


def events(stream: io.StringIO) -> list[str]:
    return [json.loads(line)["event"] for line in stream.getvalue().splitlines()]


def test_a_second_outage_with_the_same_error_is_said_again(lines: io.StringIO) -> None:
    outage = Outage("postgresql://agentd@db/agentd")
    outage.failed(ERROR)
    outage.failed(ERROR)  # the same outage: said once
    outage.reached()
    outage.failed(ERROR)  # seconds later, word for word: a new outage
    outage.reached()
    assert events(lines) == ["db.unreachable", "db.reachable", "db.unreachable", "db.reachable"]


@pytest.mark.parametrize(
    "event", ["db.unreachable", "db.reachable", "listener.lost", "lease.fenced", "lease.resumed"]
)
def test_events_said_once_per_episode_are_never_held_back(event: str) -> None:
    throttle = log.Throttle(window_s=60, clock=lambda: 0.0)
    said = {"event": event, "level": "warning", "error": ERROR}
    assert throttle(None, "warning", dict(said)) == said
    assert throttle(None, "warning", dict(said)) == said  # the same instant, word for word
