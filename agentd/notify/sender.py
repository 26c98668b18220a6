"""The daemon's notification task: plan new inbox items into the outbox, deliver what is due, record
each attempt (sent, or the error and when to retry). It only reads and writes short transactions and
awaits channels under timeouts, so no run ever waits for a notification.

Delivery is at least once: a crash between a channel accepting a message and the row saying so sends
it again after the restart, with the same id (`webhook-id`, the mail's Message-ID) to dedupe on.
Daemons sharing a database claim the due rows they attempt (db/outbox.py), so they never send one
message at once; a claim left by a daemon that died lapses on the database's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools

import structlog

from agentd.clock import SYSTEM
from agentd.config import Config
from agentd.db import outbox
from agentd.db.outbox import OutboxRow
from agentd.errors import DeliveryFailed, StateError
from agentd.notify import Channel, build, inert
from agentd.notify.plan import apply_moves, claim_due, plan_queued, retry_at, review_held
from agentd.runs.deps import Deps
from agentd.text import urls_shown

log = structlog.get_logger("agentd.notify")

# Wall seconds between looks when nothing is due sooner (one cheap read): a new item is noticed
# within this, which is quick for a person and keeps an idle daemon asleep.
POLL_S = 5.0
RETENTION_S = 30 * 86400.0  # finished outbox rows kept this long
ERROR_PAUSE_S = 5.0  # after an unexpected error, before the next pass


class Sender:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._built: tuple[Config, dict[str, Channel]] | None = None

    def channels(self) -> dict[str, Channel]:
        """Channels of the config in force (rebuilt after a reload)."""
        cfg = self.deps.config
        if self._built is None or self._built[0] is not cfg:
            self._built = (cfg, {name: build(name, n) for name, n in cfg.notify.items()})
        return self._built[1]

    async def run(self, stop: asyncio.Event) -> None:
        pruned_at = 0.0
        owner = self.deps.owner
        try:  # on SQLite this daemon is the only one: an earlier daemon's claims are let go now
            await self.deps.store.write(lambda c: outbox.release_others(c, owner))
        except StateError as e:  # then they lapse on their own
            log.error("notify.release_failed", error=str(e))
        while not stop.is_set():
            wait_s = POLL_S
            try:
                wait_s = await self.tick()
                now = self.deps.clock.now()
                if now - pruned_at > 3600:
                    horizon = now - RETENTION_S
                    prune = functools.partial(outbox.prune, older_than=horizon)
                    await self.deps.store.write_chunks(prune, until=stop)
                    pruned_at = now
            except StateError as e:  # a busy or failing database: look again shortly
                quiet = self.deps.store.outage  # said once already (db.unreachable)
                (log.debug if quiet else log.error)("notify.tick_failed", error=str(e))
                wait_s = ERROR_PAUSE_S
            except Exception as e:  # a notification bug must not end the daemon and its runs
                log.error("notify.tick_failed", error=f"{type(e).__name__}: {e}"[:300])
                wait_s = ERROR_PAUSE_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait_s)

    async def tick(self) -> float:
        """One pass; returns how long to wait before the next (wall seconds, at most POLL_S)."""
        store, cfg, now = self.deps.store, self.deps.config, self.deps.clock.now()
        owner = self.deps.owner
        queued, next_at = await store.read(
            lambda c: (outbox.has_queued(c), outbox.next_due_at(c, owner))
        )
        if queued:
            added = await store.write(lambda c: plan_queued(c, cfg, now))
            if added:
                log.info("notify.planned", messages=added)
            queued, next_at = await store.read(
                lambda c: (outbox.has_queued(c), outbox.next_due_at(c, owner))
            )
            if queued:  # a backlog bigger than one batch: the next batch now, not in POLL_S
                return 0.0
        if await store.read(outbox.has_held):
            next_at = await self._review_held(now, next_at)
        if next_at is None or next_at > now:
            return POLL_S if next_at is None else max(0.02, min(POLL_S, next_at - now))
        rows = await store.write(lambda c: claim_due(c, cfg, now, owner))
        if rows:
            await asyncio.gather(*(self._attempt(row) for row in rows))
        return 0.0 if len(rows) >= 50 else 0.02

    async def _review_held(self, now: float, next_at: float | None) -> float | None:
        """Held messages follow the settings in force: a goal's quiet hours changed by the CLI,
        a channel's urgent_in_quiet_hours after `agentd reload` (read each pass, so at once).
        Returns when the next message is due."""
        store, cfg = self.deps.store, self.deps.config
        moves = await store.read(lambda c: review_held(c, cfg, now))
        if not moves:
            return next_at
        done = await store.write(lambda c: apply_moves(c, moves, now))
        released = sum(1 for m in moves if m.tz is None)
        log.info("notify.held_moved", messages=done, released=released)
        owner = self.deps.owner
        return await store.read(lambda c: outbox.next_due_at(c, owner))

    async def _attempt(self, row: OutboxRow) -> None:
        channel = self.channels().get(row.channel)
        cfg = self.deps.config.notify.get(row.channel)
        error = None
        if channel is None or cfg is None:
            error = f"channel {row.channel!r} is no longer in the config"
        else:
            message_id = f"agentd_{row.dedupe_key.replace(':', '_')}"
            try:
                # The wall's time, even on a test clock: receivers check it against theirs.
                stamp = int(SYSTEM.now())
                # Inert here, once for every channel (and for rows planned by older code).
                message = inert(row.message)
                with self.deps.tracing.child(f"notify {row.channel}", **{
                    "agentd.channel": row.channel, "agentd.item_id": row.item_id,
                    "agentd.goal_id": row.goal_id, "agentd.stage": row.stage,
                }):  # fmt: skip
                    await channel.send(message, message_id=message_id, timestamp=stamp)
            except DeliveryFailed as e:
                error = str(e)
            except Exception as e:  # a channel's unforeseen error is one more failed attempt
                error = f"{type(e).__name__}: {e}"[:300]
            # Kept and shown (log, status, doctor) with any URL by its host: a webhook's path
            # or query is often its secret.
            error = None if error is None else urls_shown(error)
        now = self.deps.clock.now()
        self.deps.meter.delivery(row.channel, "sent" if error is None else "failed")
        if error is None:
            await self.deps.store.write(lambda c: outbox.sent(c, row.outbox_id, now))
            log.info("notify.sent", channel=row.channel, item_id=row.item_id, stage=row.stage)
            return
        again = None if cfg is None else retry_at(row.attempts + 1, row.created_at, now, cfg)
        await self.deps.store.write(
            lambda c: outbox.attempt_failed(c, row.outbox_id, now, error, again, self.deps.owner)
        )
        log.warning(
            "notify.failed" if again is None else "notify.retrying",
            channel=row.channel, item_id=row.item_id, stage=row.stage, error=error,
            attempts=row.attempts + 1, retry_in_s=None if again is None else round(again - now, 1),
        )  # fmt: skip
