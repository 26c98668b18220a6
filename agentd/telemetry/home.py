"""The home-wide gauges and counters, rendered from one read of the store (agentd/db/metrics.py),
and the whole exposition: this daemon's meter, plus the home's figures when this daemon is the one
that exports them (on a shared store one daemon does, so a sum over daemons never counts N times).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from agentd.telemetry.meter import OTHER, Meter, bound

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RUN_STATUSES = ("running", "waiting", "succeeded", "failed", "cancelled")
INBOX_KINDS = ("question", "approval", "notice")
NUDGE_OUTCOMES = ("accepted", "dismissed", "ignored", "open")


class _Home(Collector):
    def __init__(self, figures: dict[str, Any], meter: Meter) -> None:
        self.figures = figures
        self.names = meter.names

    def collect(self) -> Iterator[Metric]:
        f, names = self.figures, self.names
        runs = GaugeMetricFamily(
            "agentd_runs", "Runs by status and agent (home-wide).", labels=["status", "agent"]
        )
        by: dict[tuple[str, str], float] = {}
        for agent in sorted(names.agents):
            for status in RUN_STATUSES:
                by[(status, agent)] = 0
        for status, agent, n in f["runs"]:
            key = (str(status), bound(agent, names.agents))
            by[key] = by.get(key, 0) + n
        for (status, agent), n in sorted(by.items()):
            runs.add_metric([status, agent], n)
        yield runs
        inbox = GaugeMetricFamily(
            "agentd_inbox_open", "Open inbox items by kind (home-wide).", labels=["kind"]
        )
        open_by = dict.fromkeys(INBOX_KINDS, 0) | {str(k): n for k, n in f["inbox"]}
        for kind, n in sorted(open_by.items()):
            inbox.add_metric([kind], n)
        yield inbox
        yield GaugeMetricFamily(
            "agentd_approvals_open", "Open approvals (home-wide).", value=open_by.get("approval", 0)
        )
        yield GaugeMetricFamily(
            "agentd_approval_oldest_age_seconds",
            "Age of the oldest open approval; 0 when none is open.",
            value=f["approval_oldest_s"] or 0.0,
        )
        checkins = CounterMetricFamily(
            "agentd_checkins_recorded",
            "Check-ins in the journal by status (home-wide; retention trims it).",
            labels=["status"],
        )
        for status, n in f["checkins"]:
            checkins.add_metric([str(status)], n)
        yield checkins
        nudges = GaugeMetricFamily(
            "agentd_nudges",
            "Nudges posted, by the goal's agent and outcome (accepted, dismissed, ignored, open).",
            labels=["agent", "outcome"],
        )
        counted: dict[tuple[str, str], float] = {}
        for agent, outcome, n in f["nudges"]:
            key = (bound(agent, names.agents), str(outcome))
            counted[key] = counted.get(key, 0) + n
        for (agent, outcome), n in sorted(counted.items()):
            nudges.add_metric([agent, outcome], n)
        yield nudges
        outbox = GaugeMetricFamily(
            "agentd_outbox_messages",
            "Notification messages by channel and "
            "status (pending, sent, failed, cancelled; home-wide).",
            labels=["channel", "status"],
        )
        msgs: dict[tuple[str, str], float] = {}
        for channel, status, n in f["outbox"]:
            key = (bound(channel, names.channels), str(status))
            msgs[key] = msgs.get(key, 0) + n
        for (channel, status), n in sorted(msgs.items()):
            outbox.add_metric([channel, status], n)
        yield outbox
        held = GaugeMetricFamily(
            "agentd_notifications_held",
            "Messages held by quiet hours, by channel (home-wide).",
            labels=["channel"],
        )
        for channel, n in f["held"]:
            held.add_metric([bound(channel, names.channels)], n)
        yield held
        limits, counts, count, total = f["decisions"]
        decided = HistogramMetricFamily(
            "agentd_approval_decision_seconds",
            "From an approval's posting to its decision (decided approvals in the journal).",
        )
        bounds = [(str(b), n) for b, n in zip(limits, counts, strict=True)]
        decided.add_metric([], [*bounds, ("+Inf", count)], total)
        yield decided
        goals = GaugeMetricFamily("agentd_goals", "Goals by status (home-wide).", labels=["status"])
        for status, n in f["goals"]:
            goals.add_metric([str(status)], n)
        yield goals


def render(meter: Meter, figures: dict[str, Any] | None) -> bytes:
    """The text exposition: the meter's metrics, then the home's (None: another daemon exports
    them; `agentd_home_exporter` says which one does, 1 or 0)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Both(meter, figures))
    return generate_latest(registry)


class _Both(Collector):
    def __init__(self, meter: Meter, figures: dict[str, Any] | None) -> None:
        self.meter = meter
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        yield from self.meter.registry.collect()
        yield GaugeMetricFamily(
            "agentd_home_exporter",
            "1 on the daemon that exports the home-wide figures (one per home), else 0.",
            value=int(self.figures is not None),
        )
        if self.figures is not None:
            yield from _Home(self.figures, self.meter).collect()


__all__ = ["CONTENT_TYPE", "OTHER", "render"]
