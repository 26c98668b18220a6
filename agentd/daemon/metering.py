"""What this daemon's meter reads at each scrape from what the daemon keeps anyway — the store's
commit counts, the runs it drives, its lease keeper's counts, its listener — so none of it costs a
step anything (agentd/telemetry/meter.py; the names are in docs/observability.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from agentd.api.metrics import names_of
from agentd.runs.deps import Deps
from agentd.telemetry.tracing import Tracing

log = structlog.get_logger("agentd.daemon")


def watch(deps: Deps, engine: Any, keeper: Any, listener: Callable[[], Any]) -> None:
    """Point the meter at the daemon's parts; `listener()` is the LISTEN thread or None."""
    m = deps.meter
    m.names = names_of(deps.config)
    cfg = deps.config
    if cfg.metrics.enabled and cfg.api.listen_port(cfg.web) is None:
        log.warning("metrics.no_port", note="[metrics] enabled, but no [api] port: GET /metrics "
                    "is served on the unix socket api.sock only; set [api] port for Prometheus")  # fmt: skip
    store = deps.store
    m.store("postgres" if store.backend.shared else "sqlite")
    m.watch("agentd_store_commits", "Group commits made by this daemon's writer.",
            lambda: store.batches, "counter")  # fmt: skip
    m.watch("agentd_store_writes", "Writes carried by those commits (writes / commits: the "
            "group-commit batch size).", lambda: store.writes, "counter")  # fmt: skip
    m.watch("agentd_runs_driving", "Runs this daemon is executing a step of now.",
            lambda: len(engine.tasks))  # fmt: skip
    m.watch("agentd_leases_held", "Runs this daemon holds a lease on.", lambda: len(engine.live()))
    m.watch("agentd_lease_renewals", "Lease renewals (shared store).", lambda: keeper.renewals,
            "counter")  # fmt: skip
    m.watch("agentd_lease_fences", "Times this daemon fenced itself (no renewal in time).",
            lambda: keeper.fences, "counter")  # fmt: skip
    m.watch("agentd_lease_takeovers", "Runs of a gone daemon this one took over.",
            lambda: keeper.takeovers, "counter")  # fmt: skip
    m.watch("agentd_fenced", "1 while this daemon is fenced (takes no new work).",
            lambda: int(bool(engine.fenced)))  # fmt: skip

    def up() -> float:
        found = listener()
        return 1.0 if found is not None and found.connected.is_set() else 0.0

    m.watch("agentd_listener_up", "1 while the LISTEN connection is up (shared store; 0 on "
            "SQLite, which needs none).", up)  # fmt: skip


def start_tracing(deps: Deps) -> None:
    """`[tracing]` as configured at start (a reload does not change it: restart to)."""
    deps.tracing = Tracing.start(deps.config.tracing, deps.meter)
    deps.tracing.db_id = deps.db_id  # a run's trace id derives from it: one trace per run


async def stop_tracing(deps: Deps) -> None:
    """Flush what is queued (bounded by the export timeout), on a thread: never the loop's."""
    await asyncio.to_thread(deps.tracing.stop, deps.config.tracing.timeout_s)
