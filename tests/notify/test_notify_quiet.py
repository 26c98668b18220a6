"""Urgency decides quiet hours: an approval or a question a run waits on pages at once inside the
goal's quiet hours (per channel: `urgent_in_quiet_hours = "send" | "hold"`), nudges and notices wait
for their end, a page is never held past its item's expiry, held messages follow a changed goal
cadence or a reloaded config at once, and `agentd status` names what is held and what will be late.
A real webhook receiver on 127.0.0.1 and a Sender on a manual clock (test_notify's rig)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentd.cli import status as status_cmd
from agentd.daemon.serve import reload
from agentd.db import queries as q
from agentd.models import InboxKind, from_ts
from agentd.operator.schedules import CadenceChange, set_cadence
from agentd.views.held import at
from agentd.views.records import status_view
from tests.conftest import closed_port
from tests.notify import test_notify
from tests.notify.test_notify import HOUR, Receiver, config_text

receiver, rig = test_notify.receiver, test_notify.rig

QUIET = 'quiet = "22:00-08:00", tz = "Europe/Berlin"'
LATE_EVENING = datetime(2026, 12, 1, 22, 34, tzinfo=UTC).timestamp()  # 23:34 CET in Berlin
MORNING = datetime(2026, 12, 2, 7, 0, tzinfo=UTC).timestamp()  # 08:00 CET


def quiet_config(url: str, *, urgent: str | None = None, agent: str = "") -> str:
    text = config_text(url, agent=agent).replace('quiet = "none"', QUIET)
    if urgent is not None:
        text = text.replace(
            "retry_max_s = 600", f'retry_max_s = 600\nurgent_in_quiet_hours = "{urgent}"'
        )
    return text


def got(rec: Receiver) -> list[tuple[str, int]]:
    return [(g["json"]["data"]["category"], g["json"]["data"]["item_id"]) for g in rec.got]


def status_text(r: Any) -> str:
    data = r.home.store.read(lambda c: status_cmd.gather(c, r.clock.now()))
    return status_view(
        {"home": "h", "daemon": {"up": True, "pid": 1}, **data}, from_ts(r.clock.now())
    )


def notify_line(r: Any) -> str:
    return next(line for line in status_text(r).splitlines() if line.startswith("notify:"))


async def test_notify_approval_in_quiet_hours_pages_at_once_and_a_nudge_waits(
    rig: Any, receiver: Receiver
) -> None:
    """The trial's case: an approval at 23:34 in the goal's quiet hours (expiring in an hour)
    reaches the receiver at once; a nudge posted beside it waits for 08:00, and status names it."""
    r = await rig(quiet_config(receiver.url))
    r.clock.set(LATE_EVENING)
    approval = r.post(InboxKind.APPROVAL, expires_at=LATE_EVENING + HOUR)
    nudge = r.post(InboxKind.NOTICE, title="try the cache?", rule="nudge")
    await r.settle()
    assert got(receiver) == [("approval", approval)]
    assert receiver.got[0]["valid"]
    health = r.health()["ops"]
    assert health["held"] == 1 and health["held_items"][0]["tz"] == "Europe/Berlin"
    line = notify_line(r)  # the held nudge is said once, as held, not also as waiting
    assert line == f"notify: ops ok · 1 held by quiet hours until 08:00 CET (nudge {nudge})"
    r.clock.set(MORNING - 60)
    await r.settle()
    assert len(receiver.got) == 1
    r.clock.set(MORNING)
    await r.settle()
    assert got(receiver) == [("approval", approval), ("nudge", nudge)]
    assert "held" not in status_text(r)


async def test_notify_blocking_question_pages_at_once_a_checkin_question_waits(
    rig: Any, receiver: Receiver
) -> None:
    """A question a run waits on is urgent; a check-in's question (no run) is not."""
    r = await rig(quiet_config(receiver.url))
    r.clock.set(LATE_EVENING)
    run_id = r.home.store.write(
        lambda c: q.create_run(c, goal_id=r.goal_id, agent="default", trigger="test")
    )
    blocking = r.post(InboxKind.QUESTION, title="which region?", run_id=run_id)
    checkin = r.post(InboxKind.QUESTION, title="goal achieved?", rule="achieved")
    await r.settle()
    assert got(receiver) == [("question", blocking)]
    assert f"(question {checkin})" in status_text(r)


async def test_notify_channel_that_holds_urgent_keeps_it_but_never_past_expiry(
    rig: Any, receiver: Receiver
) -> None:
    """`urgent_in_quiet_hours = "hold"`: an approval that outlives the quiet hours waits for
    08:00; one that expires before then goes now — held, it would be no page at all."""
    r = await rig(quiet_config(receiver.url, urgent="hold"))
    r.clock.set(LATE_EVENING)
    lasting = r.post(InboxKind.APPROVAL, expires_at=MORNING + HOUR)
    expiring = r.post(InboxKind.APPROVAL, expires_at=LATE_EVENING + HOUR)
    await r.settle()
    assert got(receiver) == [("approval", expiring)]
    assert f"1 held by quiet hours until 08:00 CET (approval {lasting})" in status_text(r)
    r.clock.set(MORNING)
    await r.settle()
    assert got(receiver) == [("approval", expiring), ("approval", lasting)]


async def test_notify_urgent_setting_is_per_channel_and_reminders_count_per_channel(
    rig: Any, receiver: Receiver
) -> None:
    """ops sends at once, mail (holding) at 08:00; each channel's 1 h reminder counts from its
    own first message: ops at 00:34, mail at 09:00."""
    mail = Receiver()
    try:
        text = (
            quiet_config(receiver.url, agent='remind_after = ["1h"]').replace(
                'channels = ["ops"]', 'channels = ["ops", "mail"]'
            )
            + f'\n[notify.mail]\ntype = "webhook"\nurl = "{mail.url}"\nurgent_in_quiet_hours = "hold"\n'
        )
        r = await rig(text)
        r.clock.set(LATE_EVENING)
        approval = r.post(InboxKind.APPROVAL, expires_at=MORNING + 4 * HOUR)
        await r.settle()
        stages = lambda rec: [g["json"]["data"]["stage"] for g in rec.got]  # noqa: E731
        assert (stages(receiver), stages(mail)) == ([0], [])
        r.clock.set(LATE_EVENING + HOUR)
        await r.settle()
        assert (stages(receiver), stages(mail)) == ([0, 1], [])
        r.clock.set(MORNING)
        await r.settle()
        assert stages(mail) == [0] and mail.got[0]["json"]["data"]["item_id"] == approval
        r.clock.set(MORNING + HOUR - 60)
        await r.settle()
        assert stages(mail) == [0]
        r.clock.set(MORNING + HOUR)
        await r.settle()
        assert stages(mail) == [0, 1]
    finally:
        mail.close()


async def test_notify_held_messages_follow_the_goals_changed_quiet_hours(
    rig: Any, receiver: Receiver
) -> None:
    """A nudge held until 08:00; the operator turns the goal's quiet hours off (`agentd goal
    cadence --quiet none`): it goes on the sender's next pass, not at 08:00. Moved to end at
    06:00 instead, a second one is held to 06:00."""
    r = await rig(quiet_config(receiver.url))
    r.clock.set(LATE_EVENING)
    first = r.post(InboxKind.NOTICE, title="first", rule="nudge")
    second = r.post(InboxKind.NOTICE, title="second", rule="nudge")
    await r.settle()
    assert receiver.got == [] and "2 held by quiet hours until 08:00 CET" in status_text(r)
    cfg = r.sender.deps.config
    set_cadence(r.home.store, cfg, r.goal_id, CadenceChange(quiet="22:00-06:00"))
    await r.settle()
    assert receiver.got == [] and "2 held by quiet hours until 06:00 CET" in status_text(r)
    set_cadence(r.home.store, cfg, r.goal_id, CadenceChange(quiet="none"))
    await r.settle()
    assert sorted(got(receiver)) == [("nudge", first), ("nudge", second)]
    assert "held" not in status_text(r)


async def test_notify_reload_releases_held_approvals_when_the_channel_sends(
    rig: Any, receiver: Receiver
) -> None:
    """A channel set to hold keeps an approval for the morning; the operator changes it to
    "send" and runs `agentd reload`: the approval goes at once, the nudge still waits."""
    r = await rig(quiet_config(receiver.url, urgent="hold"))
    r.clock.set(LATE_EVENING)
    approval = r.post(InboxKind.APPROVAL, expires_at=MORNING + HOUR)
    nudge = r.post(InboxKind.NOTICE, title="a thought", rule="nudge")
    await r.settle()
    assert receiver.got == []
    r.home.paths.config.write_text(quiet_config(receiver.url, urgent="send"))
    assert await reload(r.home.paths, r.sender.deps, {})
    await r.settle()
    assert got(receiver) == [("approval", approval)]
    assert f"1 held by quiet hours until 08:00 CET (nudge {nudge})" in status_text(r)


async def test_notify_status_says_a_page_will_be_late(rig: Any) -> None:
    """A failing channel whose backoff takes an approval's next try past its expiry: status says
    the page will be late, and when."""
    r = await rig(quiet_config(f"http://127.0.0.1:{closed_port()}"))
    r.clock.set(LATE_EVENING)
    approval = r.post(InboxKind.APPROVAL, expires_at=LATE_EVENING + 100)
    await r.settle()  # fails; retry in 60 s, before the expiry
    assert "late" not in status_text(r)
    r.clock.advance(60)
    await r.settle()  # fails again; retry in 120 s, after it
    now = from_ts(r.clock.now())  # a late page's times are in the local zone, as status's others
    next_try, expiry = at(LATE_EVENING + 180, None, now), at(LATE_EVENING + 100, None, now)
    expected = (
        f"approval {approval} will be late: its next try {next_try} is after it expires at {expiry}"
    )
    assert expected in notify_line(r)
