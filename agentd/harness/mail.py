"""What the harness adds for mail: the arguments the model gives a mail action (menu fields) and
the gate on a reply that would leave by SMTP — never where the action only saves drafts, and never
to a recipient outside the action's `allow_recipients` without an approval, whatever the policy
default. Pure: what a mail said can change none of it (DESIGN §4.5)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints

from agentd.config.mail import MailFlagAction, MailMoveAction, MailReplyAction
from agentd.models import JSON, Verdict

FLAGS = ("seen", "flagged", "answered")
_MessageId = Annotated[
    str, StringConstraints(min_length=3, max_length=500, pattern=r"^<[\x21-\x3b=\x3f-\x7e]+>$")
]


# One plain addr-spec and nothing a mail parser could read as a second address, a comment, a
# group or a route: a tab or "(...)" once turned "evil@x.org<TAB>a@example.com" (allowed by
# "*@example.com") into a send to evil@x.org. No "%" or "!" (relay routing) either.
_ADDR_SPEC = re.compile(
    r"[A-Za-z0-9#$&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9#$&'*+/=?^_`{|}~-]+)*"
    r"@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+"
)


def _address(value: str) -> str:
    if not _ADDR_SPEC.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not one plain mail address (name@example.com: ASCII letters, "
            "digits and . _ + - before the @, a domain after it)"
        )
    return value


Address = Annotated[str, StringConstraints(max_length=254), AfterValidator(_address)]


def fields_for(cfg: Any) -> dict[str, Any] | None:
    """The argument fields of a mail action, or None for another kind of action."""
    mid = (_MessageId, Field(description="the Message-ID of the message, with its <>"))
    if isinstance(cfg, MailMoveAction):
        any_folder = Annotated[
            str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\r\n\x00]+$")
        ]
        folder: Any = Literal[tuple(cfg.folders)] if cfg.folders else any_folder
        return {"message_id": mid, "folder": (folder, ...)}
    if isinstance(cfg, MailFlagAction):
        flag: Any = Literal[(*FLAGS, *cfg.keywords)]
        return {"message_id": mid, "flag": (flag, ...), "set": (bool, True)}
    if isinstance(cfg, MailReplyAction):
        text = Annotated[str, StringConstraints(min_length=1, max_length=cfg.max_body_chars)]
        subject = Annotated[
            str,
            StringConstraints(
                min_length=1, max_length=300, pattern=r"^[^\x00-\x1f\x7f\x85\u2028\u2029]*$"
            ),
        ]
        return {
            "message_id": mid,
            "to": (list[Address], Field(min_length=1, max_length=10)),
            "subject": (subject, ...),
            "body": (text, ...),
            "send": (bool, Field(False, description="send now (else: save a draft)")),
        }
    return None


def describe(cfg: Any) -> str | None:
    if isinstance(cfg, MailMoveAction):
        return "Move a message (by Message-ID) to a folder."
    if isinstance(cfg, MailFlagAction):
        return "Set or clear a flag (seen, flagged, answered, a keyword) on a message."
    if isinstance(cfg, MailReplyAction):
        where = "or send it (where policy allows)" if cfg.send else "(this agent never sends)"
        return f"Reply to a message: save the reply as a draft {where}."
    return None


def gate(cfg: Any, args: JSON, verdict: Verdict, rule: str) -> tuple[Verdict, str]:
    """The policy's verdict, made stricter for a reply that would be sent."""
    if not isinstance(cfg, MailReplyAction) or not args.get("send") or verdict == Verdict.DENY:
        return verdict, rule
    if not cfg.send:
        return Verdict.DENY, "mail: this reply action only saves drafts (send = false)"
    outside = [a for a in args.get("to", []) if not cfg.allows(str(a))]
    if outside and verdict == Verdict.ALLOW:
        return Verdict.APPROVE, "mail: recipients outside allow_recipients: " + ", ".join(outside)
    return verdict, rule


def shown(cfg: Any, args: JSON) -> JSON | None:
    """What the operator approves: the exact recipients, subject and body, and whether it sends."""
    if not isinstance(cfg, MailReplyAction):
        return None
    what = "send over SMTP" if args.get("send") else f"save a draft in {cfg.drafts}"
    return {"mail": what, "in_reply_to": args.get("message_id"), "to": args.get("to"),
            "subject": args.get("subject"), "body": args.get("body")}  # fmt: skip
