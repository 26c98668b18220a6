"""Paging defaults for a service watch: a run that gave up ("failure": the service may still be
down) pages at once inside the default quiet hours, like an approval; a plain notice still waits
for their end. A real webhook receiver and a Sender on a manual clock (test_notify's rig)."""

from __future__ import annotations

from typing import Any

from agentd.db import queries as q
from agentd.models import InboxKind
from tests.notify import test_notify
from tests.notify.test_notify import Receiver
from tests.notify.test_notify_quiet import LATE_EVENING, MORNING, got, quiet_config

receiver, rig = test_notify.receiver, test_notify.rig


async def test_notify_failure_in_quiet_hours_pages_at_once_a_notice_waits(
    rig: Any, receiver: Receiver
) -> None:
    r = await rig(quiet_config(receiver.url))
    r.clock.set(LATE_EVENING)
    run_id = r.home.store.write(
        lambda c: q.create_run(c, goal_id=r.goal_id, agent="default", trigger="test")
    )
    r.home.store.write(
        lambda c: c.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?", (run_id,))
    )
    failure = r.post(InboxKind.NOTICE, title=f"run {run_id} failed: still down", run_id=run_id)
    notice = r.post(InboxKind.NOTICE, title="weekly report ready")
    await r.settle()
    assert got(receiver) == [("failure", failure)]
    r.clock.set(MORNING)
    await r.settle()
    assert got(receiver) == [("failure", failure), ("notice", notice)]


async def test_notify_failure_waits_on_a_channel_that_holds_urgent(
    rig: Any, receiver: Receiver
) -> None:
    r = await rig(quiet_config(receiver.url, urgent="hold"))
    r.clock.set(LATE_EVENING)
    run_id = r.home.store.write(
        lambda c: q.create_run(c, goal_id=r.goal_id, agent="default", trigger="test")
    )
    r.home.store.write(
        lambda c: c.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?", (run_id,))
    )
    r.post(InboxKind.NOTICE, title=f"run {run_id} failed: still down", run_id=run_id)
    await r.settle()
    assert got(receiver) == []
