"""The mail followers: one task per imap source an agent uses, holding its connection open
between runs (agentd/sources/imap.py) and committing each batch of new mail as events with the
source's cursor (agentd/db/mail.py), then nudging the scheduler so triggers start runs now."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from agentd.config import Config
from agentd.config.mail import ImapSource
from agentd.db import mail as qm
from agentd.runs.deps import Deps
from agentd.sources import Source

if TYPE_CHECKING:
    from agentd.sources.imap import ImapSourceReader

log = structlog.get_logger("agentd.mail")


def followed(deps: Deps) -> list[Source]:
    """The imap sources some agent uses, as the daemon built them (the IMAP code is imported
    only when there is one: a daemon without mail starts as fast as before)."""
    return [s for s in deps.sources.values() if isinstance(getattr(s, "cfg", None), ImapSource)]


def followed_config(cfg: Config) -> dict[str, ImapSource]:
    """The imap sources a daemon with `cfg` follows (those some agent uses), by name."""
    used = {n for agent in cfg.agents.values() for n in agent.sources}
    return {n: s for n, s in cfg.sources.items() if n in used and isinstance(s, ImapSource)}


def needs_restart(old: Config, new: Config) -> list[str]:
    """The mail followers a reload does not start, stop or change (they are started with the
    daemon): each imap source followed before or after whose table changed, as `[sources.NAME]`."""
    was, now = followed_config(old), followed_config(new)
    return [
        f"[sources.{n}] (its mail follower)"
        for n in sorted(was.keys() | now.keys())
        if was.get(n) != now.get(n)
    ]


async def follow_mail(deps: Deps, stop: asyncio.Event, nudge: Callable[[], None]) -> None:
    """Follow every imap source until `stop` (a failing one retries on its own)."""
    readers = followed(deps)
    if not readers:
        return
    from agentd.sources.imap import ImapSourceReader

    async with asyncio.TaskGroup() as tg:
        for reader in readers:
            assert isinstance(reader, ImapSourceReader)
            tg.create_task(_follow(deps, reader, stop, nudge), name=f"imap:{reader.name}")


async def _follow(
    deps: Deps, reader: ImapSourceReader, stop: asyncio.Event, nudge: Callable[[], None]
) -> None:
    from agentd.sources.imap import Batch, Cursor

    name = reader.name
    stored = await deps.store.read(lambda c: qm.cursor(c, name))
    start = Cursor(*stored) if stored else None

    async def deliver(batch: Batch) -> None:
        reset = (batch.reset.uidvalidity, batch.reset.last_uid) if batch.reset else None

        def work(c: Any) -> list[int]:
            return qm.record_mail(
                c, name, batch.cursor.uidvalidity, batch.cursor.last_uid, batch.messages, reset
            )

        ids = await deps.store.write(work)
        if ids:
            log.info("mail.received", source=name, events=len(ids), last_uid=batch.cursor.last_uid)
            nudge()

    await reader.follow(start, deliver, stop)
