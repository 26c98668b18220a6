"""Email over SMTP with the standard library, in a worker thread: TLS first (STARTTLS before
anything else is said, or implicit TLS from the first byte; none only to a loopback relay), then
login with the password from the variable `password_env` names."""

from __future__ import annotations

import asyncio
import smtplib
from email.message import EmailMessage
from email.utils import formatdate

from agentd import config
from agentd.config.notify import EmailNotify
from agentd.errors import DeliveryFailed
from agentd.models import JSON
from agentd.notify import subject, text
from agentd.outside import smtp as smtp_out


class Email:
    def __init__(self, name: str, cfg: EmailNotify) -> None:
        self.name = name
        self.cfg = cfg

    def compose(self, message: JSON, message_id: str, timestamp: int) -> EmailMessage:
        mail = EmailMessage()
        mail["From"] = self.cfg.sender
        mail["To"] = ", ".join(self.cfg.to)
        mail["Subject"] = subject(message)
        mail["Date"] = formatdate(timestamp, usegmt=True)
        mail["Message-ID"] = f"<{message_id}@agentd>"  # the same on every retry
        if message.get("priority") in ("high", "urgent"):
            mail["Importance"] = "high"
        mail.set_content(text(message))
        return mail

    async def send(self, message: JSON, *, message_id: str, timestamp: int) -> None:
        password = None
        if self.cfg.password_env is not None:
            password = config.secret(self.cfg.password_env)
            if password is None:
                raise DeliveryFailed(f"${self.cfg.password_env} (the SMTP password) is not set")
        mail = self.compose(message, message_id, timestamp)
        where = f"{self.cfg.host}:{self.cfg.port}"
        try:
            # smtplib's own timeout bounds each socket operation, so the thread ends too.
            async with asyncio.timeout(self.cfg.timeout_s + 1):
                await asyncio.to_thread(self._deliver, mail, password)
        except TimeoutError:
            raise DeliveryFailed(f"{where}: no answer within {self.cfg.timeout_s:g}s") from None
        except (smtplib.SMTPException, OSError) as e:
            raise DeliveryFailed(f"{where}: {type(e).__name__}: {e}") from None

    def _deliver(self, mail: EmailMessage, password: str | None) -> None:
        smtp_out.deliver(self.cfg, mail, password)
