"""A reply that has left over SMTP is a done action even when its copy cannot be kept in Sent, and
one the server may have got (it timed out on the message's answer) has an unknown outcome, not a
failure: reported as failed, the model would reply again (a new action, a new Message-ID: sent
twice)."""

from __future__ import annotations

import pytest

from agentd.actions import ActionContext
from agentd.actions.mail import MailExecutor
from agentd.config.mail import ImapSource, MailReplyAction
from agentd.config.notify import EmailNotify
from tests.dovecot import PASSWORD_ENV
from tests.dovecot_server import Dovecot
from tests.mail_support import smtp_server

pytestmark = [pytest.mark.timeout(60)]
LONG = "S" * 400
CTX = ActionContext(run_id=9, goal_id=1, seq=2, action="reply", db_id="abcd1234")


async def test_a_sent_reply_whose_copy_fails_is_done_and_says_so(dovecot: Dovecot) -> None:
    mailbox = ImapSource.model_validate({
        "type": "imap", "host": dovecot.host, "port": dovecot.port, "tls": "none",
        "user": dovecot.user, "password_env": PASSWORD_ENV,
    })  # fmt: skip
    # Dovecot refuses a mailbox name this long: the APPEND after the send fails.
    cfg = MailReplyAction.model_validate(
        {"type": "mail_reply", "source": "inbox", "send": True, "smtp": "relay", "sent": LONG}
    )
    args = {"message_id": "<q@example.com>", "to": ["bob@example.com"], "subject": "Re: q",
            "body": "Yes.", "send": True}  # fmt: skip
    with smtp_server() as box:
        relay = EmailNotify.model_validate({
            "type": "email", "host": "127.0.0.1", "port": box.port, "tls": "none",
            "from": "agent@example.com", "to": ["ops@example.com"],
        })  # fmt: skip
        result = await MailExecutor("reply", cfg, mailbox, relay).execute(args, CTX)
        assert len(box.got) == 1
    assert result["ok"] is True and result["sent"] == ["bob@example.com"]
    assert "no copy kept in S" in result["sent_copy"]


async def test_a_send_timed_out_on_the_message_is_unknown_not_failed(dovecot: Dovecot) -> None:
    mailbox = ImapSource.model_validate({
        "type": "imap", "host": dovecot.host, "port": dovecot.port, "tls": "none",
        "user": dovecot.user, "password_env": PASSWORD_ENV,
    })  # fmt: skip
    cfg = MailReplyAction.model_validate(
        {"type": "mail_reply", "source": "inbox", "send": True, "smtp": "relay"}
    )
    args = {"message_id": "<q@example.com>", "to": ["bob@example.com"], "subject": "Re: q",
            "body": "Yes.", "send": True}  # fmt: skip
    with smtp_server() as box:
        box.hold = True  # the server has the message but keeps its answer back
        relay = EmailNotify.model_validate({
            "type": "email", "host": "127.0.0.1", "port": box.port, "tls": "none",
            "from": "agent@example.com", "to": ["ops@example.com"], "timeout_s": 1,
        })  # fmt: skip
        result = await MailExecutor("reply", cfg, mailbox, relay).execute(args, CTX)
        assert box.arrived.wait(60) and len(box.got) == 1  # it reached the server
    assert result["ok"] is False and result["outcome"] == "unknown"
    assert "may have been sent" in result["error"]
