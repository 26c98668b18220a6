"""Sending one message over SMTP with the settings of an email channel ([notify.NAME], type
"email"): TLS first (STARTTLS or implicit; none only to a loopback relay), then the login, in a
worker thread bounded by the channel's timeout. Failures leave as ActionFailed naming the relay."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage

from agentd import config
from agentd.config.notify import EmailNotify
from agentd.errors import ActionFailed


class MaybeSent(ActionFailed):
    """The message was being handed over (the envelope accepted) when the connection failed or
    timed out: the server may have it. Never retry blindly: that would send it twice."""


async def send(cfg: EmailNotify, mail: EmailMessage, to: list[str] | None = None) -> None:
    """Send `mail`: to exactly `to` where given (the gated recipients; never what a parser reads
    back out of the To header), else to its To/Cc/Bcc headers."""
    password = None
    if cfg.password_env is not None:
        password = config.secret(cfg.password_env)
        if password is None:
            raise ActionFailed(f"${cfg.password_env} (the SMTP password) is not set")
    where = f"smtp://{cfg.host}:{cfg.port}"
    phase: list[str] = []  # "sending" once the message is being handed over
    try:
        async with asyncio.timeout(cfg.timeout_s + 1):
            await asyncio.to_thread(deliver, cfg, mail, password, to, phase)
    except TimeoutError:
        said = f"{where}: no answer within {cfg.timeout_s:g}s"
        raise (MaybeSent if phase else ActionFailed)(said) from None
    except smtplib.SMTPResponseException as e:  # the server's own refusal: not sent
        raise ActionFailed(f"{where}: {type(e).__name__}: {e}") from None
    except (smtplib.SMTPException, OSError) as e:
        said = f"{where}: {type(e).__name__}: {e}"
        raise (MaybeSent if phase else ActionFailed)(said) from None


def deliver(
    cfg: EmailNotify,
    mail: EmailMessage,
    password: str | None,
    to: list[str] | None = None,
    phase: list[str] | None = None,
) -> None:
    """Blocking: for a worker thread (smtplib's own timeout bounds each socket operation)."""
    cafile = str(cfg.ca_file) if cfg.ca_file is not None else None
    tls = ssl.create_default_context(cafile=cafile) if cfg.tls != "none" else None
    smtp = (
        smtplib.SMTP_SSL(cfg.host, cfg.port, timeout=cfg.timeout_s, context=tls)
        if cfg.tls == "implicit"
        else smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout_s)
    )
    with smtp:
        smtp.ehlo()
        if cfg.tls == "starttls":
            smtp.starttls(context=tls)
            smtp.ehlo()
        if cfg.username is not None and password is not None:
            smtp.login(cfg.username, password)
        if phase is not None:
            phase.append("sending")
        smtp.send_message(mail, to_addrs=to)
