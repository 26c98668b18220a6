"""The mail part of the config file: an IMAP mailbox as a source (`[sources.NAME] type = "imap"`)
and the mail actions that act on it (`mail_move`, `mail_flag`, `mail_reply`). Validated at the
edge like the rest of the config (`agentd.config` re-exports every name here)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

TLS = Literal["implicit", "starttls", "none"]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Strict(BaseModel):  # as config/actions.Strict (imported by it: no cycle through it)
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImapSource(_Strict):
    """One IMAP mailbox. Between runs a connection stays open on it (IDLE where the server offers
    it, else a look every `poll_interval_s`) and each new message becomes a `NAME.received`
    event; on each look of a run it is the mailbox's state (unseen count, newest headers)."""

    type: Literal["imap"]
    host: str = Field(min_length=1)
    # 993 for implicit TLS, 143 for STARTTLS or none (filled in from `tls` when absent).
    port: int = Field(0, ge=0, le=65535)
    # "implicit": TLS from the first byte (993); "starttls": plain connect, then STARTTLS before
    # the login (143); "none": only to a server on this machine (a test or a local bridge).
    tls: TLS = "implicit"
    ca_file: Path | None = None  # a private CA's certificate; the system's trust store otherwise
    user: str = Field(min_length=1)
    password_env: str  # the NAME of the variable (or systemd credential) holding the password
    mailbox: str = Field("INBOX", min_length=1)
    # An IMAP SEARCH filter new messages must also match to be announced, e.g. 'NOT FROM "noreply"'.
    search: str | None = None
    idle: bool = True  # use IDLE where the server offers it (a new mail is an event in seconds)
    poll_interval_s: float = Field(60.0, gt=0)  # without IDLE, and after a disconnect
    timeout_s: float = Field(30.0, gt=0, le=600)  # one IMAP command, whole
    # What of a message is read at all: the first `fetch_bytes` of it (a 50 MB mail is cut there
    # before parsing), then `excerpt_chars` of its plain text go into the event.
    fetch_bytes: int = Field(65536, ge=1024, le=10 * 1024 * 1024)
    excerpt_chars: int = Field(2000, ge=0, le=20000)
    newest: int = Field(5, ge=0, le=50)  # headers of the newest messages in the world snapshot
    # On the very first connection (no cursor yet): announce the mail already there too, instead
    # of starting from the newest message.
    announce_existing: bool = False

    @model_validator(mode="before")
    @classmethod
    def _port_follows_tls(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("port"):
            return {**data, "port": 993 if data.get("tls", "implicit") == "implicit" else 143}
        return data

    @field_validator("tls")
    @classmethod
    def _plain_only_on_loopback(cls, tls: str, info: ValidationInfo) -> str:
        from agentd.config.notify import is_loopback  # here: notify imports this family's kin

        host = info.data.get("host")
        if tls == "none" and host is not None and not is_loopback(host):
            raise ValueError(
                f'tls = "none" sends the password in clear: only to a server on this machine, '
                f'not {host}; set tls = "implicit" (port 993) or tls = "starttls" (port 143)'
            )
        return tls

    @field_validator("password_env")
    @classmethod
    def _is_a_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "must be the NAME of an environment variable (letters, digits and _), never "
                "the password itself"
            )
        return value

    @field_validator("search")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c in value for c in "\r\n\0")):
            raise ValueError('search is one IMAP SEARCH line, e.g. search = "UNSEEN"')
        return value


class MailActionBase(_Strict):
    """An action on the messages of an `imap` source (`source` names it: its connection)."""

    source: str = Field(min_length=1)
    description: str = ""
    timeout_s: float = Field(30.0, gt=0, le=600)

    def secret_names(self) -> list[str]:
        return []

    @property
    def params(self) -> dict[str, Any]:
        """No declared params: the menu gives a mail action its own fields (harness/mail.py)."""
        return {}


class MailMoveAction(MailActionBase):
    """Move a message (by its Message-ID or UID) to a folder; idempotent: moving it again finds
    it gone from the mailbox and says so."""

    type: Literal["mail_move"]
    # The folders the model may name; empty = any.
    folders: list[str] = Field(default_factory=list)


class MailFlagAction(MailActionBase):
    """Set or clear flags on a message: seen, flagged, answered, or a custom keyword."""

    type: Literal["mail_flag"]
    keywords: list[str] = Field(default_factory=list)  # custom keywords the model may set

    @field_validator("keywords")
    @classmethod
    def _atoms(cls, value: list[str]) -> list[str]:
        for word in value:
            if not word or not all(c.isalnum() or c in "-_$." for c in word):
                raise ValueError(f"keyword {word!r}: letters, digits and - _ $ . only")
        return value


class MailReplyAction(MailActionBase):
    """Reply to a message. By default the reply is saved as a draft in `drafts` (IMAP APPEND)
    and nothing is sent; with `send = true` it goes out over SMTP through the email channel
    `smtp` names (the settings notifications use), and a recipient that matches none of
    `allow_recipients` needs an approval whatever the policy says."""

    type: Literal["mail_reply"]
    send: bool = False
    smtp: str | None = None  # a [notify.channels.NAME] of type "email": host, TLS, login, sender
    drafts: str = Field("Drafts", min_length=1)
    sent: str = Field("Sent", min_length=1)  # where a sent reply's copy is kept (and looked for)
    # Address patterns (`*@example.com`, `boss@example.com`) a reply may go to without approval.
    allow_recipients: list[str] = Field(default_factory=list)
    max_body_chars: int = Field(20000, ge=1, le=200000)

    @model_validator(mode="after")
    def _send_needs_smtp(self) -> MailReplyAction:
        if self.send and self.smtp is None:
            raise ValueError(
                'send = true needs smtp = "CHANNEL": an email channel in [notify.channels]'
            )
        return self

    def allows(self, address: str) -> bool:
        """Whether `address` matches an allow-list pattern (case-insensitive)."""
        addr = address.strip().lower()
        return any(fnmatch.fnmatchcase(addr, p.strip().lower()) for p in self.allow_recipients)


MailAction = MailMoveAction | MailFlagAction | MailReplyAction
