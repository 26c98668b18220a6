"""The imap source: a mailbox as world state, and its new messages as they arrive.

`observe()` is one look (the mailbox's size, unseen count and newest headers) for a run's world
snapshot. `follow()` holds a connection open between runs: IDLE where the server offers it (and
`idle` is on), else a look every `poll_interval_s`, and after any disconnect a reconnect with
backoff. It never touches the database: the daemon hands it the cursor (UIDVALIDITY and the last
UID announced) it keeps, and a `deliver` callback that commits each batch of new messages with the
cursor they move it to. A message is untrusted data: only its first `fetch_bytes` are read, and
`outside/mime.py` bounds the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from agentd.config import secret
from agentd.config.mail import ImapSource
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside import imap, mime

log = structlog.get_logger("agentd.sources.imap")
BATCH = 200  # messages fetched (and committed) at a time
MAX_BACKOFF_S = 300.0
STOP_GRACE_S = 5.0  # for a follower to end politely at the daemon's stop
HEADER_BYTES = 16384  # of a message's header read for the world snapshot (a huge header is cut)


@dataclass(frozen=True)
class Cursor:
    uidvalidity: int
    last_uid: int


@dataclass(frozen=True)
class Batch:
    """New messages and the cursor they move the source to; `reset` when UIDVALIDITY changed
    (the mailbox was recreated: its old UIDs mean nothing now)."""

    cursor: Cursor
    messages: list[JSON]
    reset: Cursor | None = None  # the cursor before, when the mailbox was recreated


Deliver = Callable[[Batch], Awaitable[None]]


class ImapSourceReader:
    def __init__(
        self, name: str, cfg: ImapSource, secrets: Callable[[str], str | None] = secret
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.lookup = secrets
        self.idle_active = False  # whether the follower waits in IDLE now (doctor, bench)

    def session(
        self, timeout_s: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[imap.Session]:
        """A logged-in session on this mailbox's server."""
        return imap.open_mailbox(self.cfg, timeout_s=timeout_s, secrets=self.lookup)

    async def observe(self) -> JSON:
        """The mailbox now: messages, unseen, and the newest `newest` messages' headers."""
        try:
            async with self.session() as s:
                sel = await s.select(self.cfg.mailbox, readonly=True)
                status = await s.status(self.cfg.mailbox)
                uids = (await s.search("ALL"))[-self.cfg.newest :] if self.cfg.newest else []
                fetched = await s.fetch(uids, HEADER_BYTES, headers_only=True)
                idle = s.has_idle()
        except ActionFailed as e:
            return {"ok": False, "check_failed": True, "error": str(e)}
        newest = [message_of(f, 0) for f in reversed(fetched)]
        return {
            "ok": True,
            "mailbox": self.cfg.mailbox,
            "messages": sel.exists,
            "unseen": status.get("unseen", 0),
            "size_bytes": status.get("size"),  # where the server offers STATUS=SIZE
            "idle": idle,
            "newest": newest,
        }

    async def follow(self, cursor: Cursor | None, deliver: Deliver, stop: asyncio.Event) -> None:
        """Announce new mail until `stop`: catch up from `cursor`, then wait (IDLE or a poll),
        and again. A failure is logged and retried with backoff; the cursor goes on from the
        last batch `deliver` committed, so nothing is announced twice or missed. At `stop`, an
        IDLE ends politely (DONE, LOGOUT); a connect or a command that hangs is cancelled after
        STOP_GRACE_S, so a silent server never holds the daemon's stop."""
        work = asyncio.create_task(self._follow(cursor, deliver, stop))
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                await asyncio.wait({work}, timeout=STOP_GRACE_S)
        finally:
            stopping.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, stopping, return_exceptions=True)

    async def _follow(self, cursor: Cursor | None, deliver: Deliver, stop: asyncio.Event) -> None:
        backoff = 1.0
        while not stop.is_set():
            try:
                async with self.session() as s:
                    log.info("imap.connected", source=self.name, idle=s.has_idle())
                    backoff = 1.0
                    cursor = await self._follow_session(s, cursor, deliver, stop)
            except ActionFailed as e:
                log.warning("imap.disconnected", source=self.name, error=str(e), retry_s=backoff)
            except Exception:  # a bug or a database outage: reconnect later, never end the daemon
                log.exception("imap.failed", source=self.name, retry_s=backoff)
            finally:
                self.idle_active = False
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _follow_session(
        self, s: imap.Session, cursor: Cursor | None, deliver: Deliver, stop: asyncio.Event
    ) -> Cursor:
        cfg = self.cfg
        use_idle = cfg.idle and s.has_idle()
        while not stop.is_set():
            sel = await s.select(cfg.mailbox)
            cursor = await self._catch_up(s, sel, cursor, deliver)
            if use_idle:
                self.idle_active = True
                # Re-issued each poll interval (and at most every 25 min, RFC 2177): a push
                # lost in a reconnect costs one interval at most.
                waiting = asyncio.ensure_future(s.idle(min(cfg.poll_interval_s, 1500)))
                stopping = asyncio.ensure_future(stop.wait())
                await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if not waiting.done():  # stopping: end the IDLE (DONE) before logging out
                    waiting.cancel()
                    await asyncio.gather(waiting, return_exceptions=True)
                    break
                waiting.result()  # a failure reconnects
                self.idle_active = False
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), cfg.poll_interval_s)
        assert cursor is not None
        return cursor

    async def _catch_up(
        self, s: imap.Session, sel: imap.Selected, cursor: Cursor | None, deliver: Deliver
    ) -> Cursor:
        cfg = self.cfg
        reset = None
        if cursor is not None and cursor.uidvalidity != sel.uidvalidity:
            log.warning(
                "imap.uidvalidity_changed", source=self.name,
                was=cursor.uidvalidity, now=sel.uidvalidity,
            )  # fmt: skip
            reset, cursor = cursor, None
        if cursor is None:
            start = 0
            if reset is not None or not cfg.announce_existing:
                # Start from the newest message: what is there is the world, not news.
                known = await s.search("ALL")
                start = known[-1] if known else 0
            cursor = Cursor(sel.uidvalidity, start)
            await deliver(Batch(cursor, [], reset))
        uids = await s.uids_after(cursor.last_uid, cfg.search)
        if cfg.search:  # filtered: the cursor still passes the messages the filter skipped
            newest = await s.uids_after(cursor.last_uid, None)
        else:
            newest = uids
        for i in range(0, len(uids), BATCH):
            chunk = uids[i : i + BATCH]
            fetched = await s.fetch(chunk, cfg.fetch_bytes)
            messages = [message_of(f, cfg.excerpt_chars) for f in fetched]
            cursor = Cursor(sel.uidvalidity, chunk[-1])
            await deliver(Batch(cursor, messages))
        if newest and newest[-1] > cursor.last_uid:
            cursor = Cursor(sel.uidvalidity, newest[-1])
            await deliver(Batch(cursor, []))
        return cursor


def message_of(f: imap.Fetched, excerpt_chars: int) -> JSON:
    """One fetched message as event data: bounded headers, flags, size, excerpt, attachments."""
    summary = mime.summarize(f.raw, cut=f.cut and excerpt_chars > 0, excerpt_chars=excerpt_chars)
    if not excerpt_chars:
        summary.pop("excerpt", None)
        summary.pop("cut", None)
    return {"uid": f.uid, "size": f.size, "flags": list(f.flags), **summary}
