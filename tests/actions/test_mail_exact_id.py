"""mail_move and mail_flag act on the message whose Message-ID is exactly the one named: IMAP's
SEARCH HEADER matches a substring, and a hostile mail whose Message-ID header holds the real one's
("<x@evil.example> <real@example.com>") was once moved or flagged along with it (real Dovecot)."""

from __future__ import annotations

import pytest

from agentd.actions import ActionContext
from agentd.actions.mail import MailExecutor
from agentd.config.mail import ImapSource, MailFlagAction, MailMoveAction
from tests.dovecot import PASSWORD_ENV
from tests.dovecot_server import Dovecot, message
from tests.mail_support import folder

pytestmark = [pytest.mark.timeout(60)]
CTX = ActionContext(run_id=3, goal_id=1, seq=2, action="act", db_id="abcd1234")


async def test_move_and_flag_touch_only_the_exact_message_id(dovecot: Dovecot) -> None:
    box = ImapSource.model_validate({
        "type": "imap", "host": dovecot.host, "port": dovecot.port, "tls": "none",
        "user": dovecot.user, "password_env": PASSWORD_ENV,
    })  # fmt: skip
    dovecot.deliver(message("real", message_id="<real@example.com>"))
    dovecot.deliver(message("hostile", message_id="<x@evil.example> <real@example.com>"))
    flag = MailFlagAction.model_validate({"type": "mail_flag", "source": "inbox"})
    done = await MailExecutor("flag", flag, box).execute(
        {"message_id": "<real@example.com>", "flag": "flagged", "set": True}, CTX
    )
    assert done["ok"] is True
    flagged = {m["subject"]: "\\Flagged" in m["flags"] for m in await folder(dovecot, "INBOX")}
    assert flagged == {"real": True, "hostile": False}
    move = MailMoveAction.model_validate({"type": "mail_move", "source": "inbox"})
    done = await MailExecutor("archive", move, box).execute(
        {"message_id": "<real@example.com>", "folder": "Archive"}, CTX
    )
    assert done == {"ok": True, "moved": 1, "folder": "Archive"}
    assert [m["subject"] for m in await folder(dovecot, "Archive")] == ["real"]
    assert [m["subject"] for m in await folder(dovecot, "INBOX")] == ["hostile"]
