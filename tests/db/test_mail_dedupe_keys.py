"""A hostile Message-ID cannot take another message's or the reset's dedupe key: the keys of a
Message-ID, of a message without one (UIDVALIDITY:UID) and of a reset live apart, so a mail whose
Message-ID is "5:2" or "reset:6" hides nothing (real SQLite home)."""

from __future__ import annotations

from typing import Any

from agentd.db import items as qi
from agentd.db import mail as qm


def names(home: Any) -> list[tuple[str, Any]]:
    events = home.store.read(lambda c: qi.list_events(c, limit=50))
    return sorted((e.name, e.data.get("subject") or e.data.get("uidvalidity")) for e in events)


def test_a_message_id_shaped_like_a_uid_key_hides_no_message(home: Any) -> None:
    home.write_config("")
    hostile = {"uid": 1, "message_id": "5:2", "subject": "hostile"}
    home.store.write(lambda c: qm.record_mail(c, "inbox", 5, 1, [hostile]))
    plain = {"uid": 2, "message_id": "", "subject": "no Message-ID"}
    home.store.write(lambda c: qm.record_mail(c, "inbox", 5, 2, [plain]))
    assert names(home) == [("inbox.received", "hostile"), ("inbox.received", "no Message-ID")]


def test_a_message_id_shaped_like_a_reset_key_hides_no_reset(home: Any) -> None:
    home.write_config("")
    hostile = {"uid": 1, "message_id": "reset:6", "subject": "hostile"}
    home.store.write(lambda c: qm.record_mail(c, "inbox", 5, 1, [hostile]))
    home.store.write(lambda c: qm.record_mail(c, "inbox", 6, 0, [], reset=(5, 1)))
    assert names(home) == [("inbox.received", "hostile"), ("inbox.reset", 6)]
