"""What agentd sends as an IMAP argument cannot end the command: a mailbox name with a line break
or NUL is refused before anything is sent; quotes and backslashes are escaped; a FETCH answer with
literals parses into bounded messages."""

from __future__ import annotations

import pytest

from agentd.errors import ActionFailed
from agentd.outside import imap


@pytest.mark.parametrize("name", ["Archive\r\nA1 DELETE INBOX", "x\n", "a\0b", ""])
def test_imap_mailbox_name_that_could_inject_is_refused(name: str) -> None:
    with pytest.raises(ActionFailed, match="not a mailbox name"):
        imap.mailbox_arg(name)


def test_imap_mailbox_name_is_quoted_and_escaped() -> None:
    assert imap.mailbox_arg('Projects "Q1"\\x') == '"Projects \\"Q1\\"\\\\x"'


def test_imap_fetch_answer_parses_and_cuts() -> None:
    lines = [
        b"1 FETCH (UID 7 FLAGS (\\Seen $Later) RFC822.SIZE 50000000 INTERNALDATE "
        b'"07-Dec-2026 03:00:00 +0000" BODY[]<0> {10}',
        b"Subject: x",
        b")",
        b"2 FETCH (UID 8 RFC822.SIZE 3 BODY[]<0> {3}",
        b"abc",
        b" FLAGS ())",
        b"FETCH completed",
    ]
    first, second = imap._parse_fetch(lines, max_bytes=5)
    assert (first.uid, first.flags, first.size, first.raw, first.cut) == (
        7, ("\\Seen", "$Later"), 50_000_000, b"Subje", True,
    )  # fmt: skip
    assert (second.uid, second.size, second.raw, second.flags) == (8, 3, b"abc", ())
