"""This daemon's metrics: counters and histograms the loops report to through small methods.

One `Meter` per daemon (in `Deps`), on its own registry (never prometheus_client's global one: two
daemons in one test process stay apart). A report is a dict update under a lock — it never waits on
I/O, so a step never waits on a scrape. Labels are bounded: an agent, a model or a channel the config
does not name is reported as "other", and no goal title, id or event data is ever a label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

OTHER = "other"  # the label of a name the config does not know (bounded label sets)
LATENCY_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
PURPOSES = frozenset({"decide", "checkin", "generate", "judge", "summarize"})
# No `*_created` series: they doubled every counter's and histogram's series for a timestamp no
# rule or dashboard reads (Prometheus finds resets itself). Process-wide: only we use the library.
disable_created_metrics()  # type: ignore[no-untyped-call]
FAST_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Names:
    """The label values the config names: anything else is `OTHER`."""

    def __init__(self, agents: Iterable[str] = (), models: Iterable[str] = (),
                 channels: Iterable[str] = (), actions: Iterable[str] = ()) -> None:  # fmt: skip
        self.agents = frozenset(agents)
        self.models = frozenset(models)
        self.channels = frozenset(channels)
        self.actions = frozenset(actions)


def bound(value: str | None, allowed: frozenset[str]) -> str:
    return value if value is not None and value in allowed else OTHER


class Meter:
    """The per-daemon metrics (names in docs/observability.md)."""

    def __init__(self, names: Names | None = None) -> None:
        self.names = names or Names()
        self.registry = r = CollectorRegistry(auto_describe=False)
        self._steps = Counter(
            "agentd_steps",
            "Journaled run steps by kind and outcome.",
            ["kind", "outcome"],
            registry=r,
        )
        self._actions = Counter(
            "agentd_actions", "Actions executed, by action and outcome (ok, error, failed).",
            ["action", "outcome"], registry=r,
        )  # fmt: skip
        model = ["provider", "model"]
        self._model_calls = Counter(
            "agentd_model_calls", "Model calls by provider, model, purpose and outcome.",
            [*model, "purpose", "outcome"], registry=r,
        )  # fmt: skip
        self._model_s = Histogram(
            "agentd_model_call_duration_seconds", "Model call latency.", model,
            buckets=LATENCY_S, registry=r,
        )  # fmt: skip
        self._tokens = Counter(
            "agentd_model_tokens", "Model tokens by provider, model and direction.",
            [*model, "direction"], registry=r,
        )  # fmt: skip
        self._cost = Counter(
            "agentd_model_cost_usd", "Model cost in US dollars.", model, registry=r
        )
        self._deliveries = Counter(
            "agentd_notification_deliveries", "Notification delivery attempts by channel and "
            "outcome (sent, failed).", ["channel", "outcome"], registry=r,
        )  # fmt: skip
        self._act_lag = Histogram(
            "agentd_commit_to_action_seconds", "From the commit of an action's intent to its start.",
            buckets=FAST_S, registry=r,
        )  # fmt: skip
        self._tick_lag = Histogram(
            "agentd_scheduler_tick_lag_seconds", "How late the scheduler's timed ticks started.",
            buckets=FAST_S, registry=r,
        )  # fmt: skip
        self._checkins = Counter(
            "agentd_checkins", "Check-ins this daemon ended, by status: skipped (the precheck "
            "found nothing moved), done (the model decided), failed.", ["status"], registry=r,
        )  # fmt: skip
        self._up = Gauge("agentd_daemon_info", "1, with the store's engine.", ["store"], registry=r)
        self._watched = _Watched()
        r.register(self._watched)
        self.dropped_spans = Counter(
            "agentd_trace_spans_dropped", "Spans the trace exporter dropped.", registry=r
        )

    # ── reports (cheap, never blocking) ────────────────────────────────────────────────────────
    def step(self, kind: str, status: str) -> None:
        self._steps.labels(kind, status).inc()

    def action(self, action: str, outcome: str, lag_s: float | None = None) -> None:
        self._actions.labels(bound(action, self.names.actions), outcome).inc()
        if lag_s is not None:
            self._act_lag.observe(max(lag_s, 0.0))

    def model_call(self, provider: str, model: str, purpose: str, outcome: str, seconds: float,
                   tokens_in: int = 0, tokens_out: int = 0, cost_usd: float = 0.0) -> None:  # fmt: skip
        model = bound(model, self.names.models)
        purpose = purpose if purpose in PURPOSES else OTHER
        self._model_calls.labels(provider, model, purpose, outcome).inc()
        self._model_s.labels(provider, model).observe(seconds)
        if tokens_in:
            self._tokens.labels(provider, model, "input").inc(tokens_in)
        if tokens_out:
            self._tokens.labels(provider, model, "output").inc(tokens_out)
        if cost_usd:
            self._cost.labels(provider, model).inc(cost_usd)

    def checkin(self, status: str) -> None:
        self._checkins.labels(status if status in ("skipped", "done", "failed") else OTHER).inc()

    def delivery(self, channel: str, outcome: str) -> None:
        self._deliveries.labels(bound(channel, self.names.channels), outcome).inc()

    def tick_lag(self, seconds: float) -> None:
        self._tick_lag.observe(max(seconds, 0.0))

    def store(self, engine: str) -> None:
        self._up.labels(engine).set(1)

    def watch(self, name: str, doc: str, read: Callable[[], float], kind: str = "gauge") -> None:
        """A figure read at each scrape from what the daemon keeps anyway (the store's commit
        count, the runs it drives): nothing on the hot path. Called again, it replaces."""
        self._watched.figures[name] = (doc, read, kind)


class _Watched(Collector):
    def __init__(self) -> None:
        self.figures: dict[str, tuple[str, Callable[[], float], str]] = {}

    def collect(self) -> Iterator[Metric]:
        for name, (doc, read, kind) in sorted(self.figures.items()):
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, doc, value=read())
