"""A reply's arguments can name only plain addresses, one-line subjects and printable Message-IDs:
a recipient the allow-list passes is the recipient the SMTP server is given, and nothing the model
writes can add a header (pure, with a real smtplib talking to a local aiosmtpd)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError, create_model

from agentd.config.mail import MailReplyAction
from agentd.harness import mail

CFG = MailReplyAction.model_validate(
    {
        "type": "mail_reply",
        "source": "inbox",
        "send": True,
        "smtp": "relay",
        "allow_recipients": ["*@example.com"],
    }
)
Args = create_model("Args", **mail.fields_for(CFG))  # type: ignore[call-overload]
GOOD: dict[str, Any] = {"message_id": "<a@b.c>", "to": ["bob@example.com"], "subject": "Re: x",
                        "body": "hello", "send": True}  # fmt: skip

# Each is passed by "*@example.com" as a string, yet a mail parser reads another recipient out
# of it (the tab one became a send to evil@evil.org, without approval, on the old validator).
SMUGGLED = [
    "evil@evil.org\tbob@example.com",
    "group:evil@evil.org\tbob@example.com",
    "bob(evil@evil.org)@example.com",
    "evil@evil.org@example.com",
    "evil%evil.org@example.com",
    "evil@evil.org\x0bbob@example.com",
    "evil@evil.org\u2028bob@example.com",
]


def test_good_arguments_pass() -> None:
    Args.model_validate(GOOD)


@pytest.mark.parametrize("address", SMUGGLED)
def test_an_address_with_a_second_address_inside_is_refused(address: str) -> None:
    assert CFG.allows(address)  # the pattern alone would let it through
    with pytest.raises(ValidationError, match="not one plain mail address"):
        Args.model_validate({**GOOD, "to": [address]})


@pytest.mark.parametrize("subject", ["Re\x0bBcc: evil@evil.org", "Re\x85x", "Re\u2028x", "a\x00"])
def test_a_subject_with_any_line_break_or_control_character_is_refused(subject: str) -> None:
    with pytest.raises(ValidationError):
        Args.model_validate({**GOOD, "subject": subject})


@pytest.mark.parametrize("mid", ["<a\x00@b>", "<a@b\x7f>", "<a\u00e9@b>", "<a b@c>", "<a<b@c>"])
def test_a_message_id_is_printable_ascii(mid: str) -> None:
    with pytest.raises(ValidationError):
        Args.model_validate({**GOOD, "message_id": mid})


async def test_a_reply_goes_to_exactly_the_gated_recipients() -> None:
    """The envelope is the list the gate checked, not what a parser reads back from To."""
    from email.message import EmailMessage

    from agentd.config.notify import EmailNotify
    from agentd.outside import smtp
    from tests.mail_support import smtp_server

    with smtp_server() as box:
        relay = EmailNotify.model_validate(
            {
                "type": "email",
                "host": "127.0.0.1",
                "port": box.port,
                "tls": "none",
                "from": "agent@example.com",
                "to": ["ops@example.com"],
            }
        )
        mail = EmailMessage()
        mail["To"] = "bob@example.com"
        mail["Subject"] = "Re"
        mail.set_content("hello")
        mail["Bcc"] = "evil@evil.org"  # a header nobody gated
        await smtp.send(relay, mail, to=["bob@example.com"])
        assert [e.rcpt_tos for e in box.got] == [["bob@example.com"]]
