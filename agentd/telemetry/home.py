"""The home-wide gauges and counters, rendered from one read of the store (agentd/db/metrics.py),
and the whole exposition: this daemon's meter, plus the home's figures when this daemon is the one
that exports them (on a shared store one daemon does, so a sum over daemons never counts N times).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
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
        nudges = GaugeMetricFamily(
            "agentd_nudges",
            "Nudges posted, by the goal's agent and outcome (accepted, dismissed, ignored, open).",
            labels=["agent", "outcome"],
        )
        for labels, n in _summed(f["nudges"], names.agents):
            nudges.add_metric(labels, n)
        yield nudges
        outbox = GaugeMetricFamily(
            "agentd_outbox_messages",
            "Notification messages by channel and "
            "status (pending, sent, failed, cancelled; home-wide).",
            labels=["channel", "status"],
        )
        for labels, n in _summed(f["outbox"], names.channels):
            outbox.add_metric(labels, n)
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


def _summed(rows: list[tuple[Any, ...]], known: frozenset[str]) -> list[tuple[list[str], float]]:
    """(name, value, count) rows with the name bounded (unknown names become `other`, so their
    counts are summed into one series), sorted by labels."""
    sums: dict[tuple[str, str], float] = {}
    for name, value, n in rows:
        key = (bound(name, known), str(value))
        sums[key] = sums.get(key, 0) + n
    return [([name, value], n) for (name, value), n in sorted(sums.items())]


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
