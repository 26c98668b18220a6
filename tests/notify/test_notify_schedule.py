"""Quiet hours and the reminder schedule: a message held in the goal's quiet hours moves its item's
later reminders and escalation by as much, so they count from the first message actually sent and
never arrive in a burst when the hours end (a manual clock, a real webhook receiver)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.models import InboxKind
from tests.notify import test_notify
from tests.notify.test_notify import HOUR, Receiver, config_text

# test_notify's fixtures, shared: a webhook receiver, and a migrated home with a Sender on a clock.
receiver, rig = test_notify.receiver, test_notify.rig


async def test_notify_quiet_hours_delay_the_whole_schedule(rig: Any, receiver: Receiver) -> None:
    """An approval at 23:30 (quiet 22:00–08:00) on a channel that holds urgent messages too: its
    first message at 08:00, then the reminders counted from it (09:00, 12:00) — not all three at
    08:00."""
    text = config_text(receiver.url, agent='remind_after = ["1h", "4h"]').replace(
        'quiet = "none"', 'quiet = "22:00-08:00", tz = "Europe/Berlin"').replace(
        "retry_max_s = 600", 'retry_max_s = 600\nurgent_in_quiet_hours = "hold"')  # fmt: skip
    r = await rig(text)
    berlin = lambda h, m=0: datetime(2026, 12, 2, h - 1, m, tzinfo=UTC).timestamp()  # noqa: E731
    r.clock.set(datetime(2026, 12, 1, 22, 30, tzinfo=UTC).timestamp())  # 23:30 in Berlin
    r.post(InboxKind.APPROVAL)
    stages = lambda: [g["json"]["data"]["stage"] for g in receiver.got]  # noqa: E731
    for _ in range(8):  # through the night, an hour at a time
        await r.settle()
        assert stages() == []
        r.clock.advance(HOUR)
    for at, expected in [(berlin(8), [0]), (berlin(8, 59), [0]), (berlin(9), [0, 1]),
                         (berlin(11, 59), [0, 1]), (berlin(12), [0, 1, 2])]:  # fmt: skip
        r.clock.set(at)
        await r.settle()
        assert stages() == expected, datetime.fromtimestamp(at, UTC)


async def test_notify_a_reminder_held_in_quiet_hours_moves_the_later_ones(
    rig: Any, receiver: Receiver
) -> None:
    """First message at 21:30, reminders due at 22:30 and 01:30 (both quiet): the first is held
    to 08:00 and the second keeps its 3 h distance (11:00), rather than both at 08:00."""
    text = config_text(receiver.url, agent='remind_after = ["1h", "4h"]').replace(
        'quiet = "none"', 'quiet = "22:00-08:00", tz = "Europe/Berlin"')  # fmt: skip
    r = await rig(text)
    r.clock.set(datetime(2026, 12, 1, 20, 30, tzinfo=UTC).timestamp())  # 21:30 in Berlin
    r.post(InboxKind.QUESTION)
    stages = lambda: [g["json"]["data"]["stage"] for g in receiver.got]  # noqa: E731
    for _ in range(12):  # until 08:30 in Berlin
        await r.settle()
        r.clock.advance(HOUR)
    assert stages() == [0, 1]
    r.clock.set(datetime(2026, 12, 2, 10, 0, tzinfo=UTC).timestamp())  # 11:00 in Berlin
    await r.settle()
    assert stages() == [0, 1, 2]
