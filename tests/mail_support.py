"""What the mail tests share: reading a Dovecot mailbox back over IMAP, an in-process SMTP server
(aiosmtpd) that keeps what it receives, and the config tables of the mail actions."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentd.outside import imap, mime
from tests.dovecot_server import Dovecot


async def folder(server: Dovecot, name: str) -> list[dict[str, Any]]:
    """Each message in a folder: flags and its summary (headers, excerpt)."""
    async with imap.connect(
        server.host, server.port, "none", server.user, server.password, timeout_s=20
    ) as s:
        await s.select(name, readonly=True)
        fetched = await s.fetch(await s.search("ALL"), 65536)
    return [
        {"flags": f.flags, **mime.summarize(f.raw, cut=False, excerpt_chars=5000)} for f in fetched
    ]


@dataclass
class Smtp:
    port: int
    got: list[Any] = field(default_factory=list)
    # With `hold` set, the server keeps each message's final answer back until `release`.
    hold: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def smtp_server() -> Iterator[Smtp]:
    """A real SMTP server on loopback that records each message it accepts."""
    from aiosmtpd.controller import Controller

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    box = Smtp(port)

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.got.append(envelope)
            box.arrived.set()
            while box.hold and not box.release.is_set():
                await asyncio.sleep(0.02)
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box
    finally:
        box.release.set()
        controller.stop()


def relay_table(port: int) -> str:
    return (
        f'[notify.relay]\ntype = "email"\nhost = "127.0.0.1"\nport = {port}\ntls = "none"\n'
        "timeout_s = 120\n"
        'from = "agent@example.com"\nto = ["me@example.com"]\n\n'
    )


def mail_actions(*, send: bool = False, allow: str = "[]", smtp: str | None = None) -> str:
    relay = f'smtp = "{smtp}"\n' if smtp else ""
    return (
        '[actions.flag]\ntype = "mail_flag"\nsource = "inbox"\n\n'
        '[actions.archive]\ntype = "mail_move"\nsource = "inbox"\nfolders = ["Archive"]\n\n'
        f'[actions.reply]\ntype = "mail_reply"\nsource = "inbox"\nsend = {str(send).lower()}\n'
        f"allow_recipients = {allow}\n{relay}\n"
    )
