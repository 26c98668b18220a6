"""Mail is untrusted, bounded data: each hostile message is parsed (what could be read is kept,
what went wrong is in `defects`) and never crashes the parser or the source; a real Dovecot holding
all of them still lets the source announce each, and the mail after them."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.db import items as qi
from agentd.outside import mime
from tests import mail_hostile as hostile
from tests.configs import FINISH, scripted_home
from tests.conftest import wait_for
from tests.dovecot import imap_source
from tests.dovecot_server import Dovecot, message

FETCH = 65536  # the imap source's default fetch_bytes: what is read of a message at all


@pytest.mark.parametrize("kind", sorted(hostile.ALL))
def test_mime_hostile_message_is_summarized_within_bounds(kind: str) -> None:
    raw = hostile.ALL[kind]()
    cut = len(raw) > FETCH
    summary = mime.summarize(raw[:FETCH], cut=cut, excerpt_chars=2000)  # returns, never raises
    assert len(summary["excerpt"]) <= 2000
    assert all(len(str(summary.get(k, ""))) <= 500 for k in ("subject", "date", "message_id"))
    assert summary["message_id"].endswith("@hostile.example>")
    assert len(str(summary)) < 10_000


def test_mime_huge_mail_is_cut_and_says_so() -> None:
    summary = mime.summarize(hostile.huge()[:FETCH], cut=True, excerpt_chars=100)
    assert summary["excerpt"].startswith("Start of it.")
    assert summary["cut"] is True
    assert any("cut" in d for d in summary["defects"])


def test_mime_zip_bomb_is_named_never_opened() -> None:
    summary = mime.summarize(hostile.zip_bomb(), cut=False, excerpt_chars=2000)
    assert summary["attachments"] == [{"name": "q.zip", "type": "application/zip"}]
    assert summary["excerpt"] == "See attached."


def test_mime_many_parts_stop_at_the_bound() -> None:
    summary = mime.summarize(hostile.many_parts(), cut=False, excerpt_chars=2000)
    assert any(f"more than {mime.MAX_PARTS} parts" in d for d in summary["defects"])
    assert summary["excerpt"] == "part 0"


def test_mime_malformed_and_eight_bit_are_read_as_far_as_they_go() -> None:
    bad = mime.summarize(hostile.malformed(), cut=False, excerpt_chars=2000)
    assert bad["subject"] == "malformed mime"
    eight = mime.summarize(hostile.eight_bit_header(), cut=False, excerpt_chars=2000)
    assert eight["subject"].startswith("8bit h")
    assert "Caf" in eight["excerpt"]


def test_mime_html_becomes_its_visible_text() -> None:
    summary = mime.summarize(hostile.html_only(), cut=False, excerpt_chars=2000)
    assert summary["excerpt"] == "Hello there\nSecond\xa0line"


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_imap_source_announces_hostile_mail_and_goes_on(
    home: Any, dovecot: Dovecot, serve: Any
) -> None:
    text = scripted_home(["finish"], tables=imap_source(dovecot), agent_keys='sources = ["inbox"]')
    home.write_config(text, replies=[FINISH])
    await serve()
    cursor = "SELECT 1 FROM meta WHERE key = 'imap_cursor:inbox'"
    await wait_for(lambda: home.store.read(lambda c: c.execute(cursor).fetchone()) is not None, 30)
    for build in hostile.ALL.values():
        dovecot.deliver(build())
    dovecot.deliver(message("an ordinary one", message_id="<after@example.com>"))

    def received() -> list[Any]:
        events = home.store.read(lambda c: qi.events_after(c, 0))
        return [e for e in events if e.name == "inbox.received"]

    await wait_for(lambda: len(received()) == len(hostile.ALL) + 1, 90)
    by_id = {e.data["message_id"]: e.data for e in received()}
    huge = by_id["<huge@hostile.example>"]
    assert huge["size"] > 50_000_000 and huge["cut"] is True
    assert by_id["<after@example.com>"]["subject"] == "an ordinary one"
    assert all(len(str(d)) < 10_000 for d in by_id.values())
