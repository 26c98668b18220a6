"""The mail executors against a real Dovecot, without a daemon: a move is idempotent (again, the
message is gone and it says so), a flag is set and cleared, and after a crash `verify` finds a
reply by its Message-ID (the idempotency key): a draft or a sent copy found is done, a draft not
found may be saved again, a send not found is unknown (the operator decides; never sent twice)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.actions import ActionContext
from agentd.actions.mail import MailExecutor, reply_id
from agentd.config.mail import ImapSource, MailFlagAction, MailMoveAction, MailReplyAction
from agentd.outside import imap
from tests.dovecot import PASSWORD_ENV
from tests.dovecot_server import Dovecot, message
from tests.mail_support import folder

pytestmark = [pytest.mark.timeout(60)]
CTX = ActionContext(run_id=7, goal_id=1, seq=4, action="reply", db_id="abcd1234")


def mailbox(server: Dovecot) -> ImapSource:
    return ImapSource.model_validate({
        "type": "imap", "host": server.host, "port": server.port, "tls": "none",
        "user": server.user, "password_env": PASSWORD_ENV,
    })  # fmt: skip


def executor(server: Dovecot, **cfg: Any) -> MailExecutor:
    kind = cfg.pop("type")
    model = {"mail_move": MailMoveAction, "mail_flag": MailFlagAction,
             "mail_reply": MailReplyAction}[kind]  # fmt: skip
    return MailExecutor("act", model.model_validate({"type": kind, "source": "inbox", **cfg}),
                        mailbox(server))  # fmt: skip


async def test_mail_move_again_says_gone(dovecot: Dovecot) -> None:
    dovecot.deliver(message("old", message_id="<old@example.com>"))
    move = executor(dovecot, type="mail_move")
    args = {"message_id": "<old@example.com>", "folder": "Archive"}
    assert (await move.execute(args, CTX))["ok"] is True
    again = await move.execute(args, CTX)
    assert again["ok"] is False and "moved or deleted already" in again["error"]
    assert [m["subject"] for m in await folder(dovecot, "Archive")] == ["old"]


async def test_mail_flag_sets_and_clears(dovecot: Dovecot) -> None:
    dovecot.deliver(message("f", message_id="<f@example.com>"))
    flag = executor(dovecot, type="mail_flag", keywords=["$Later"])
    await flag.execute({"message_id": "<f@example.com>", "flag": "$Later", "set": True}, CTX)
    await flag.execute({"message_id": "<f@example.com>", "flag": "seen", "set": True}, CTX)
    (m,) = await folder(dovecot, "INBOX")
    assert "$Later" in m["flags"] and "\\Seen" in m["flags"]
    await flag.execute({"message_id": "<f@example.com>", "flag": "seen", "set": False}, CTX)
    (m,) = await folder(dovecot, "INBOX")
    assert "\\Seen" not in m["flags"]


async def test_mail_reply_verify_finds_it_by_message_id(dovecot: Dovecot) -> None:
    args = {"message_id": "<q@example.com>", "to": ["bob@example.com"], "subject": "Re: q",
            "body": "Yes.", "send": False}  # fmt: skip
    draft = executor(dovecot, type="mail_reply")
    assert await draft.verify(args, CTX) is False  # not saved yet: saving it again is harmless
    result = await draft.execute(args, CTX)
    assert result["message_id"] == reply_id(CTX)
    assert await draft.verify(args, CTX) is True
    sending = executor(dovecot, type="mail_reply", send=True, smtp="relay")
    sent_args = {**args, "send": True}
    assert await sending.verify(sent_args, CTX) is None  # not in Sent: it may have left; ask
    async with imap.open_mailbox(mailbox(dovecot)) as s:  # the copy a finished send leaves
        raw = message("Re: q", message_id=reply_id(CTX))
        await s.append("Sent", raw, "\\Seen")
    assert await sending.verify(sent_args, CTX) is True
