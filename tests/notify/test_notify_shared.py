"""Two daemons' senders on one database (a SQLite file, a PostgreSQL database): a message is sent
once. The first sender claims the due row in the transaction that picks it; while its channel is
still delivering, the second sender neither sees the message as due nor can claim it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.clock import ManualClock
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.backend import Backend
from agentd.db.store import Store, SyncStore
from agentd.models import JSON, InboxKind
from agentd.notify.plan import claim_due, plan_queued
from agentd.notify.sender import Sender
from agentd.runs.deps import Deps

NOON = 1_700_000_000.0
CONFIG = """
[models.default]
provider = "template"

[notify.ops]
type = "webhook"
url = "http://127.0.0.1:9/hook"

[agents.a]
actions = ["finish"]
checkin = { quiet = "none" }

[agents.a.notify]
channels = ["ops"]
on = ["question"]
"""


class Gate:
    """A channel that records each delivery and holds the first until released."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.release = asyncio.Event()
        self.entered = asyncio.Event()

    async def send(self, message: JSON, *, message_id: str, timestamp: int) -> None:
        self.sent.append(message_id)
        self.entered.set()
        await self.release.wait()


@pytest.mark.backends
async def test_two_senders_send_a_message_once(
    tmp_path: Path, backend_at: Callable[[Path], Backend]
) -> None:
    (tmp_path / "config.toml").write_text(CONFIG)
    cfg = config.load(tmp_path / "config.toml")
    path = tmp_path / "agentd.db"
    setup = SyncStore(path, backend=backend_at(path))

    def post(c: Any) -> None:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        qi.post(c, InboxKind.QUESTION, title="which region?", goal_id=goal)

    setup.write(post)
    gate = Gate()
    stores, senders = [], []
    for owner in ("A", "B"):
        store = Store(path, backend=backend_at(path))
        await store.open()
        stores.append(store)
        deps = Deps(config=cfg, store=store, models={}, executors={}, sources={}, owner=owner,
                    clock=ManualClock(NOON))  # fmt: skip
        sender = Sender(deps)
        sender._built = (cfg, {"ops": gate})  # type: ignore[dict-item]
        senders.append(sender)
    a, b = senders
    try:
        first = asyncio.create_task(a.tick())  # plans the message, claims it, delivers it
        await asyncio.wait_for(gate.entered.wait(), 20)
        # A delivers: B is not told the message is due (it would spin on it) …
        assert await b.tick() > 1.0
        # … and cannot claim it, whether asked directly or after A's claim committed.
        assert await stores[1].write(lambda c: claim_due(c, cfg, NOON, "B")) == []
        gate.release.set()
        await asyncio.wait_for(first, 20)
        for sender in (b, a, b):
            await sender.tick()
        assert len(gate.sent) == 1
        rows = setup.read(lambda c: c.execute("SELECT status, attempts, claimed_by FROM outbox"))
        assert [tuple(r) for r in rows] == [("sent", 1, None)]
    finally:
        for store in stores:
            await store.close()
        setup.close()


@pytest.mark.backends
async def test_a_senders_retry_is_anyones_once_due(
    tmp_path: Path, backend_at: Callable[[Path], Backend]
) -> None:
    """A failed attempt lets go of its claim: the retry is taken by whichever daemon looks."""
    (tmp_path / "config.toml").write_text(CONFIG)
    cfg = config.load(tmp_path / "config.toml")
    path = tmp_path / "agentd.db"
    store = SyncStore(path, backend=backend_at(path))

    def post(c: Any) -> None:
        goal = q.add_goal(c, title="t", why="t", agent="a", criteria=[], deadline=None)
        qi.post(c, InboxKind.QUESTION, title="which region?", goal_id=goal)

    store.write(post)
    store.write(lambda c: plan_queued(c, cfg, NOON))
    (row,) = store.write(lambda c: claim_due(c, cfg, NOON, "A"))
    assert store.write(lambda c: claim_due(c, cfg, NOON, "B")) == []
    store.write(lambda c: outbox.attempt_failed(c, row.outbox_id, NOON, "down", NOON + 1, "A"))
    assert store.write(lambda c: claim_due(c, cfg, NOON, "B")) == []  # not due yet
    (again,) = store.write(lambda c: claim_due(c, cfg, NOON + 1, "B"))
    assert again.outbox_id == row.outbox_id and again.attempts == 1
    store.close()
