"""The dependencies object: everything the engine talks to, built once by the daemon (or a test)
and passed down — no globals."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentd.actions import Executor
from agentd.clock import Clock, SystemClock
from agentd.config import Config
from agentd.db.store import Store
from agentd.harness.menu import Menu
from agentd.llm import Model, ModelReply, ModelRequest
from agentd.models import JSON, StepStatus
from agentd.sources import Source
from agentd.telemetry.meter import Meter
from agentd.telemetry.tracing import Tracing

# How long a claimed run's lease lasts without renewal, in the database's seconds: the daemon
# sets `Deps.lease_s` from `[store] lease_s` (config/store.py) and renews every third of it.
LEASE_S = 30.0


@dataclass
class Deps:
    """Everything the engine talks to, built once by the daemon (or a test) and passed down."""

    config: Config
    store: Store
    models: dict[str, Model]
    executors: dict[str, Executor]
    sources: dict[str, Source]
    owner: str
    lease_s: float = LEASE_S
    # False while this daemon may take no new work — runs, wakes, check-ins: it is fenced (its
    # leases could not be renewed), or a newer agentd applied a breaking migration, when it also
    # hands the runs it held to the other daemons (daemon/leases.py).
    claiming: bool = True
    # Whether this daemon still vouches for its leases on its own clock (daemon/leases.py): the
    # last check before a side effect starts, for a process thawed past its fence.
    lease_ok: Callable[[], bool] = lambda: True
    menus: dict[str, Menu] = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)  # the one clock (DESIGN §5: base)
    db_id: str = ""  # the database's random id (meta), the first part of idempotency keys
    # Results of actions that ran but are not journaled yet, by (run_id, seq): a retry after a
    # transient database error journals them instead of running the action again.
    held: dict[tuple[int, int], tuple[StepStatus, JSON]] = field(default_factory=dict)
    # Held from counting this daemon's free run slots to launching what it claimed with them:
    # its two claimers (the scheduler's adoption of new runs, the lease keeper's of lapsed ones)
    # never both count the same free slots and take twice max_concurrent_runs between them.
    claims: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Nudges the scheduler after a commit it may act on (a run started waiting).
    on_change: Callable[[], None] = lambda: None
    # This daemon's metrics (agentd/telemetry/): the loops report to it, GET /metrics renders it.
    meter: Meter = field(default_factory=Meter)
    tracing: Tracing = field(default_factory=Tracing.off)  # [tracing]: off unless configured

    async def complete(self, name: str, request: ModelRequest) -> ModelReply:
        """Ask the model configured as `name`, measured (agentd/telemetry/): latency, outcome,
        tokens and cost by provider and model. Errors pass through unchanged."""
        cfg = self.config.models.get(name)
        provider = cfg.provider if cfg is not None else "other"
        started = time.monotonic()
        try:
            with self.tracing.model_call(provider, name, request.purpose, request.prompt) as span:
                reply = await self.models[name].complete(request)
                if span is not None:
                    span.set_attributes({"gen_ai.response.model": reply.model,
                                         "gen_ai.usage.input_tokens": reply.tokens_in,
                                         "gen_ai.usage.output_tokens": reply.tokens_out})  # fmt: skip
        except BaseException as e:
            outcome = "timeout" if isinstance(e, TimeoutError | asyncio.CancelledError) else "error"
            self.meter.model_call(
                provider, name, request.purpose, outcome, time.monotonic() - started
            )
            raise
        price = self.config.price_of(reply.model)
        cost = (
            price.cost_usd(reply.tokens_in, reply.tokens_out, reply.tokens_cached) if price else 0
        )
        self.meter.model_call(provider, name, request.purpose, "ok", time.monotonic() - started,
                              reply.tokens_in, reply.tokens_out, cost)  # fmt: skip
        return reply

    def menu(self, agent: str) -> Menu:
        if agent not in self.menus:
            self.menus[agent] = Menu(self.config, self.config.agents[agent])
        return self.menus[agent]
