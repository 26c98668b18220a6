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


async def send(cfg: EmailNotify, mail: EmailMessage, to: list[str] | None = None) -> None:
    """Send `mail`: to exactly `to` where given (the gated recipients; never what a parser reads
    back out of the To header), else to its To/Cc/Bcc headers."""
    password = None
    if cfg.password_env is not None:
        password = config.secret(cfg.password_env)
        if password is None:
            raise ActionFailed(f"${cfg.password_env} (the SMTP password) is not set")
    where = f"smtp://{cfg.host}:{cfg.port}"
    try:
        async with asyncio.timeout(cfg.timeout_s + 1):
            await asyncio.to_thread(deliver, cfg, mail, password, to)
    except TimeoutError:
        raise ActionFailed(f"{where}: no answer within {cfg.timeout_s:g}s") from None
    except (smtplib.SMTPException, OSError) as e:
        raise ActionFailed(f"{where}: {type(e).__name__}: {e}") from None


def deliver(
    cfg: EmailNotify, mail: EmailMessage, password: str | None, to: list[str] | None = None
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
        smtp.send_message(mail, to_addrs=to)
