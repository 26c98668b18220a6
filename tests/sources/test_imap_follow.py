"""The imap source against a real Dovecot: a new message is an event (and starts the run its
trigger names) through IDLE, or within the poll interval without it; a restart neither repeats
nor misses mail; a recreated mailbox (UIDVALIDITY changed) is said and followed from there."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import mail as qm
from agentd.db import queries as q
from tests.configs import scripted_home
from tests.conftest import Home, wait_for
from tests.dovecot import imap_source
from tests.dovecot_server import Dovecot, message

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FINISH = {
    "reason": "read it",
    "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"},
}


def mail_home(home: Home, server: Dovecot, **keys: Any) -> None:
    text = scripted_home(
        ["finish"],
        tables=imap_source(server, **keys),
        agent_keys='triggers = ["inbox.received"]\nsources = ["inbox"]',
    )
    home.write_config(text, replies=[FINISH] * 20)
    home.add_goal(title="read my mail")


def received(home: Home) -> list[Any]:
    events = home.store.read(lambda c: qi.events_after(c, 0))
    return [e for e in events if e.name == "inbox.received"]


def subjects(home: Home) -> list[str]:
    return [e.data["subject"] for e in received(home)]


def runs(home: Home) -> list[Any]:
    return home.store.read(lambda c: q.list_runs(c))


@pytest.mark.backends
async def test_imap_new_message_starts_a_run_through_idle(
    home: Home, dovecot: Dovecot, serve: Any
) -> None:
    dovecot.deliver(message("old news"))  # there before agentd looked: the world, not news
    mail_home(home, dovecot, poll_interval_s=600)  # only IDLE can be this quick
    await serve()
    await wait_for(lambda: home.store.read(lambda c: qm.cursor(c, "inbox")) is not None, 30)
    dovecot.deliver(message("invoice 42", "Please pay by Friday.", sender="bob@example.com"))
    await wait_for(lambda: bool(runs(home)), 30)
    (event,) = received(home)
    assert event.data["subject"] == "invoice 42"
    assert event.data["from"] == ["bob@example.com"]
    assert event.data["excerpt"] == "Please pay by Friday."
    assert event.dedupe_key.startswith("mail:inbox:id:<invoice-42-")
    (run,) = runs(home)
    assert run.trigger == "event:inbox.received"


async def test_imap_without_idle_polls(home: Home, dovecot_no_idle: Dovecot, serve: Any) -> None:
    mail_home(home, dovecot_no_idle, poll_interval_s=0.5)
    await serve()
    await wait_for(lambda: home.store.read(lambda c: qm.cursor(c, "inbox")) is not None, 30)
    dovecot_no_idle.deliver(message("polled"))
    await wait_for(lambda: subjects(home) == ["polled"], 30)


@pytest.mark.backends
async def test_imap_restart_neither_repeats_nor_misses(
    home: Home, dovecot: Dovecot, serve: Any
) -> None:
    mail_home(home, dovecot)
    daemon = await serve()
    await wait_for(lambda: home.store.read(lambda c: qm.cursor(c, "inbox")) is not None, 30)
    dovecot.deliver(message("before the stop"))
    await wait_for(lambda: subjects(home) == ["before the stop"], 30)
    assert await daemon.shutdown() == 0
    dovecot.deliver(message("while down 1"))
    dovecot.deliver(message("while down 2", message_id=""))
    await serve()
    await wait_for(lambda: len(received(home)) == 3, 30)
    dovecot.deliver(message("after the start"))
    await wait_for(lambda: len(received(home)) == 4, 30)
    assert subjects(home) == ["before the stop", "while down 1", "while down 2", "after the start"]


async def test_imap_recreated_mailbox_is_said(home: Home, dovecot: Dovecot, serve: Any) -> None:
    dovecot.doveadm("mailbox", "create", "-u", dovecot.user, "Watched")
    mail_home(home, dovecot, mailbox="Watched", poll_interval_s=2)  # IDLE re-issued often
    daemon = await serve()
    await wait_for(lambda: home.store.read(lambda c: qm.cursor(c, "inbox")) is not None, 30)
    was = home.store.read(lambda c: qm.cursor(c, "inbox"))
    await daemon.shutdown()
    dovecot.doveadm("mailbox", "delete", "-u", dovecot.user, "Watched")
    dovecot.doveadm("mailbox", "create", "-u", dovecot.user, "Watched")
    await serve()

    def reset():
        return [
            e for e in home.store.read(lambda c: qi.events_after(c, 0)) if e.name == "inbox.reset"
        ]

    await wait_for(lambda: bool(reset()), 30)
    assert reset()[0].data["uidvalidity_was"] == was[0]
    dovecot.deliver(message("into the new one"), mailbox="Watched")
    await wait_for(lambda: subjects(home) == ["into the new one"], 30)


async def test_imap_silent_server_does_not_hold_the_stop(home: Home, serve: Any) -> None:
    """A server that accepts the connection and never greets: the daemon still stops (in the
    follower's grace, not the source's 60 s timeout)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        port = listener.getsockname()[1]
        silent = Dovecot.__new__(Dovecot)  # only its address is used: nothing answers there
        silent.port = port
        text = scripted_home(
            ["finish"], tables=imap_source(silent, timeout_s=60),
            agent_keys='triggers = ["inbox.received"]\nsources = ["inbox"]',
        )  # fmt: skip
        home.write_config(text, replies=[FINISH])
        daemon = await serve()
        assert await daemon.shutdown() == 0  # within RunningDaemon's 20 s
