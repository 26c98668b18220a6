"""The mail actions on an imap source's mailbox: mail_move, mail_flag and mail_reply.

A message is named by its Message-ID (the model never sees UIDs, which change when mail moves).
A reply's own Message-ID is made from the action's idempotency key, so it is the same on every
attempt: recovery after a crash looks for it (in Drafts, or in Sent for a reply that was being
sent) instead of guessing. A reply is sent only with `send = true` in its config and `send` in
its arguments, which the harness has already gated (harness/mail.py); otherwise it is a draft.
"""

from __future__ import annotations

import re
import time
from email.message import EmailMessage
from email.utils import formatdate

from agentd.actions import ActionContext
from agentd.config.mail import (
    ImapSource,
    MailActionBase,
    MailFlagAction,
    MailMoveAction,
    MailReplyAction,
)
from agentd.config.notify import EmailNotify
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside import imap, mime, smtp

SYSTEM_FLAGS = {"seen": "\\Seen", "flagged": "\\Flagged", "answered": "\\Answered"}


class MailExecutor:
    def __init__(
        self,
        name: str,
        cfg: MailActionBase,
        mailbox: ImapSource,
        relay: EmailNotify | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.mailbox = mailbox
        self.relay = relay
        # A move or a flag is the same twice; a reply is not (recovery looks for it instead).
        self.idempotent = not isinstance(cfg, MailReplyAction)

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        async with imap.open_mailbox(self.mailbox, timeout_s=self.cfg.timeout_s) as s:
            if isinstance(self.cfg, MailReplyAction):
                return await self._reply(s, self.cfg, args, ctx)
            await s.select(self.mailbox.mailbox)
            uids = await _exactly(s, str(args["message_id"]))
            if not uids:
                return {"ok": False, "error": f"no message {args['message_id']} in "
                        f"{self.mailbox.mailbox} (moved or deleted already?)"}  # fmt: skip
            if isinstance(self.cfg, MailMoveAction):
                for uid in uids:
                    await s.move(uid, str(args["folder"]))
                return {"ok": True, "moved": len(uids), "folder": args["folder"]}
            assert isinstance(self.cfg, MailFlagAction)
            flag = SYSTEM_FLAGS.get(str(args["flag"]), str(args["flag"]))
            op = "+FLAGS" if args.get("set", True) else "-FLAGS"
            for uid in uids:
                await s.store(uid, op, flag)
            return {"ok": True, "flag": args["flag"], "set": bool(args.get("set", True))}

    async def _reply(
        self, s: imap.Session, cfg: MailReplyAction, args: JSON, ctx: ActionContext
    ) -> JSON:
        mail = self.compose(cfg, args, ctx)
        if not (args.get("send") and cfg.send):
            await s.append(cfg.drafts, mail.as_bytes(), "\\Draft \\Seen")
            return {"ok": True, "draft": cfg.drafts, "message_id": mail["Message-ID"]}
        if self.relay is None:
            raise ActionFailed(f"{self.name}: no SMTP channel to send with")
        if await _holds(s, cfg.sent, mail["Message-ID"]):
            return {"ok": True, "sent": "already", "message_id": mail["Message-ID"]}
        try:
            await smtp.send(self.relay, mail, to=[str(a) for a in args["to"]])
        except smtp.MaybeSent as e:  # ambiguous: the server may have it (never sent twice)
            return {"ok": False, "outcome": "unknown", "message_id": mail["Message-ID"],
                    "error": f"{e}; it may have been sent: do not reply to this message "
                    "again before asking the operator"}  # fmt: skip
        sent: JSON = {"ok": True, "sent": list(args["to"]), "message_id": mail["Message-ID"]}
        # The copy in Sent is what recovery looks for: a crash before it asks the operator. The
        # mail has left: a copy that fails is said, never a failed action (retried = sent twice).
        try:
            await s.append(cfg.sent, mail.as_bytes(), "\\Seen")
        except ActionFailed as e:
            return {**sent, "sent_copy": f"sent, but no copy kept in {cfg.sent}: {e}"}
        return sent

    def compose(self, cfg: MailReplyAction, args: JSON, ctx: ActionContext) -> EmailMessage:
        mail = EmailMessage()
        mail["From"] = self.relay.sender if self.relay is not None else self.mailbox.user
        mail["To"] = ", ".join(str(a) for a in args["to"])
        mail["Subject"] = str(args["subject"])
        mail["Date"] = formatdate(time.time(), usegmt=True)
        mail["Message-ID"] = reply_id(ctx)
        mail["In-Reply-To"] = str(args["message_id"])
        mail["References"] = str(args["message_id"])
        mail["Auto-Submitted"] = "auto-replied"  # RFC 3834: other robots do not answer it
        mail.set_content(str(args["body"]))
        return mail

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """A reply with this key's Message-ID in Sent (or, for a draft, in Drafts) happened; a
        draft not there did not (saving it again is harmless); a send not in Sent is unknown:
        it may have left before the crash, so the operator is asked (never sent twice)."""
        if not isinstance(self.cfg, MailReplyAction):
            return None
        sending = bool(args.get("send") and self.cfg.send)
        folder = self.cfg.sent if sending else self.cfg.drafts
        try:
            async with imap.open_mailbox(self.mailbox, timeout_s=self.cfg.timeout_s) as s:
                if await _holds(s, folder, reply_id(ctx)):
                    return True
        except ActionFailed:
            return None
        return None if sending else False

    async def fence(self, ctx: ActionContext, spawned: JSON | None) -> JSON:
        return {"killed": [], "survivors": []}


def reply_id(ctx: ActionContext) -> str:
    """The reply's Message-ID: the action's idempotency key, the same on every attempt."""
    key = re.sub(r"[^A-Za-z0-9.]", ".", ctx.idempotency_key)
    return f"<agentd.{key}@agentd.invalid>"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def _exactly(s: imap.Session, message_id: str) -> list[int]:
    """The UIDs whose Message-ID is exactly `message_id`: SEARCH HEADER matches a substring, so
    a hostile "Message-ID: <x@evil> <real@example.com>" would be moved along with the real one."""
    uids = await s.search("HEADER", "Message-ID", _quoted(message_id))
    heads = await s.fetch(uids, 16384, headers_only=True) if uids else []
    return [f.uid for f in heads if mime.summarize(f.raw, cut=True, excerpt_chars=0)
            .get("message_id", "").strip() == message_id]  # fmt: skip


async def _holds(s: imap.Session, folder: str, message_id: str) -> bool:
    try:
        await s.select(folder, readonly=True)
    except ActionFailed:
        return False  # no such folder: nothing was put there
    return bool(await s.search("HEADER", "Message-ID", _quoted(message_id)))
