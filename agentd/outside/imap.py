"""An IMAP session over aioimaplib (the only module that imports it): connect with TLS (implicit,
STARTTLS, or none to this machine), log in, and the few commands agentd needs — SELECT, UID
SEARCH, a bounded UID FETCH, IDLE, flags, MOVE, APPEND.

aioimaplib because it is asyncio-native, implements IDLE (RFC 2177) with a push queue, is
maintained (2.x, 2026) and has no dependencies. Every failure leaves here as ActionFailed naming
the server; no password ever appears in one.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from aioimaplib import aioimaplib

from agentd.config import secret
from agentd.config.mail import ImapSource
from agentd.errors import ActionFailed

_SELECT_CODES = re.compile(rb"\[(UIDVALIDITY|UIDNEXT) (\d+)\]")
_EXISTS = re.compile(rb"^(\d+) EXISTS")
_FETCH_HEAD = re.compile(rb"^\d+ FETCH \(")
_UID = re.compile(rb"UID (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_FLAGS = re.compile(rb"FLAGS \(([^)]*)\)")
_DATE = re.compile(rb'INTERNALDATE "([^"]*)"')
_STATUS = re.compile(rb"(MESSAGES|UNSEEN|UIDNEXT|UIDVALIDITY|SIZE) (\d+)")


@dataclass(frozen=True)
class Selected:
    uidvalidity: int
    uidnext: int
    exists: int


@dataclass(frozen=True)
class Fetched:
    """One message as fetched: its first bytes only (`raw`), and whether it was cut there."""

    uid: int
    flags: tuple[str, ...]
    size: int
    internaldate: str
    raw: bytes

    @property
    def cut(self) -> bool:
        return self.size > len(self.raw)


def mailbox_arg(name: str) -> str:
    """A mailbox name as an IMAP argument: quoted (with its quotes and backslashes escaped). A
    line break or NUL could end the command and start another: refused, never sent."""
    if any(c in name for c in "\r\n\0") or not name:
        raise ActionFailed(f"{name[:80]!r} is not a mailbox name (empty, or a line break in it)")
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Session:
    """A logged-in connection. Use `connect()`; every command is bounded by `timeout_s`."""

    def __init__(self, client: aioimaplib.IMAP4, where: str, timeout_s: float) -> None:
        self.client = client
        self.where = where
        self.timeout_s = timeout_s

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset(c.upper() for c in self.client.protocol.capabilities)

    def has_idle(self) -> bool:
        return "IDLE" in self.capabilities

    async def _ok(self, what: str, call: object) -> list[bytes]:
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await call  # type: ignore[misc]
        except TimeoutError:
            raise ActionFailed(
                f"{self.where}: no answer to {what} within {self.timeout_s:g}s"
            ) from None
        except (aioimaplib.AioImapException, OSError) as e:
            raise ActionFailed(f"{self.where}: {what} failed: {type(e).__name__}: {e}") from None
        if response.result != "OK":
            said = b" ".join(bytes(x) for x in response.lines[-1:]).decode(errors="replace")
            raise ActionFailed(f"{self.where}: {what} refused: {said[:200]}")
        return [bytes(x) for x in response.lines]

    async def select(self, mailbox: str, *, readonly: bool = False) -> Selected:
        call = (
            self.client.examine(mailbox_arg(mailbox))
            if readonly
            else self.client.select(mailbox_arg(mailbox))
        )
        lines = await self._ok(f"SELECT {mailbox}", call)
        if readonly:  # aioimaplib moves to SELECTED on SELECT only; EXAMINE selects too
            self.client.protocol.state = aioimaplib.SELECTED
        codes: dict[bytes, int] = {}
        exists = 0
        for line in lines:
            codes.update((k, int(v)) for k, v in _SELECT_CODES.findall(line))
            if m := _EXISTS.match(line):
                exists = int(m.group(1))
        if b"UIDVALIDITY" not in codes:
            raise ActionFailed(f"{self.where}: SELECT {mailbox} gave no UIDVALIDITY")
        return Selected(codes[b"UIDVALIDITY"], codes.get(b"UIDNEXT", 0), exists)

    async def status(self, mailbox: str) -> dict[str, int]:
        items = "(MESSAGES UNSEEN UIDNEXT UIDVALIDITY" + (
            " SIZE)" if "STATUS=SIZE" in self.capabilities else ")"
        )
        call = self.client.status(mailbox_arg(mailbox), items)
        lines = await self._ok(f"STATUS {mailbox}", call)
        return {k.decode().lower(): int(v) for line in lines for k, v in _STATUS.findall(line)}

    async def search(self, *criteria: str) -> list[int]:
        """UIDs matching a UID SEARCH, ascending."""
        lines = await self._ok("UID SEARCH", self.client.uid_search(*criteria, charset=None))
        uids: list[int] = []
        # aioimaplib strips the untagged `SEARCH`: its line is all numbers (an `N EXISTS`
        # pushed meanwhile is not), and the last line is the tagged completion.
        for line in lines[:-1]:
            tokens = line.removeprefix(b"SEARCH").split()
            if tokens and all(t.isdigit() for t in tokens):
                uids += [int(t) for t in tokens]
        return sorted(set(uids))

    async def uids_after(self, last_uid: int, search: str | None) -> list[int]:
        """UIDs above `last_uid` (`n:*` always names the newest message: filtered out here)."""
        found = await self.search("UID", f"{last_uid + 1}:*", *([search] if search else []))
        return [u for u in found if u > last_uid]

    async def fetch(
        self, uids: list[int], max_bytes: int, *, headers_only: bool = False
    ) -> list[Fetched]:
        """Flags, size, date and the first `max_bytes` of each message (never more: a 50 MB mail
        is cut at the server), without setting \\Seen."""
        if not uids:
            return []
        part = f"BODY.PEEK[{'HEADER' if headers_only else ''}]<0.{max_bytes}>"
        spec = f"(UID FLAGS RFC822.SIZE INTERNALDATE {part})"
        lines = await self._ok("UID FETCH", self.client.uid("fetch", _uid_set(uids), spec))
        return _parse_fetch(lines, max_bytes)

    async def idle(self, wait_s: float) -> bool:
        """IDLE until the server speaks of new mail (EXISTS or RECENT) or `wait_s` passes;
        keep-alives ("OK Still here") do not end it. DONE is sent before this returns."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        news = False
        try:
            idle = await self.client.idle_start(timeout=wait_s)
            try:
                while not news and (left := deadline - loop.time()) > 0:
                    try:
                        pushed = await self.client.wait_server_push(timeout=left)
                    except TimeoutError:
                        break
                    if not isinstance(pushed, list):  # the library's stop marker: time is up
                        break
                    news = any(b"EXISTS" in bytes(x) or b"RECENT" in bytes(x) for x in pushed)
            finally:
                self.client.idle_done()
                async with asyncio.timeout(self.timeout_s):
                    await idle
        except TimeoutError:
            raise ActionFailed(
                f"{self.where}: IDLE did not end within {self.timeout_s:g}s"
            ) from None
        except (aioimaplib.AioImapException, OSError) as e:
            raise ActionFailed(f"{self.where}: IDLE failed: {type(e).__name__}: {e}") from None
        return news

    async def store(self, uid: int, op: str, flags: str) -> None:
        await self._ok("UID STORE", self.client.uid("store", str(uid), op, f"({flags})"))

    async def move(self, uid: int, folder: str) -> None:
        if "MOVE" in self.capabilities:
            await self._ok("UID MOVE", self.client.uid("move", str(uid), mailbox_arg(folder)))
            return
        await self._ok("UID COPY", self.client.uid("copy", str(uid), mailbox_arg(folder)))
        await self.store(uid, "+FLAGS.SILENT", "\\Deleted")
        await self._ok("EXPUNGE", self.client.expunge())

    async def append(self, mailbox: str, raw: bytes, flags: str) -> None:
        with contextlib.suppress(ActionFailed):  # there already, as usual
            await self._ok("CREATE", self.client.create(mailbox_arg(mailbox)))
        await self._ok(f"APPEND {mailbox}", self.client.append(raw, mailbox_arg(mailbox), flags))

    async def close(self) -> None:
        """LOGOUT (politely, briefly), then close the socket whatever happened — a cancelled
        logout included (the daemon stopping): a socket left open is a leak."""
        try:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await self.client.logout()
        finally:
            _drop(self.client)


@contextlib.asynccontextmanager
async def connect(
    host: str,
    port: int,
    tls: str,
    user: str,
    password: str,
    *,
    timeout_s: float,
    ca_file: Path | None = None,
) -> AsyncIterator[Session]:
    """A logged-in session; logged out (or dropped) when the block ends."""
    where = f"imap://{host}:{port}"
    context = None
    if tls != "none":
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if tls == "implicit":
        client: aioimaplib.IMAP4 = aioimaplib.IMAP4_SSL(
            host, port, timeout=timeout_s, ssl_context=context
        )
    else:
        client = aioimaplib.IMAP4(host, port, timeout=timeout_s)
    try:
        await client.wait_hello_from_server()
    except TimeoutError:
        _drop(client)
        raise ActionFailed(f"{where}: no greeting within {timeout_s:g}s") from None
    except (aioimaplib.AioImapException, OSError) as e:
        _drop(client)
        raise ActionFailed(f"{where}: cannot connect: {type(e).__name__}: {e}") from None
    except BaseException:  # cancelled (the daemon stops): the socket must not outlive it
        _drop(client)
        raise
    session = Session(client, where, timeout_s)
    try:
        if tls == "starttls":
            assert context is not None
            await _starttls(session, host, context)
        lines = await session._ok("LOGIN", client.login(user, password))
        if b"CAPABILITY" not in b" ".join(lines):
            await session._ok("CAPABILITY", _capability(client))
        yield session
    finally:
        await session.close()


async def _capability(client: aioimaplib.IMAP4) -> aioimaplib.Response:
    await client.protocol.capability()
    return aioimaplib.Response("OK", [])


async def _starttls(session: Session, host: str, context: ssl.SSLContext) -> None:
    """STARTTLS (RFC 3501 6.2.1), which aioimaplib lacks: the command, then TLS on the same
    transport, then the capabilities again (they may change once encrypted)."""
    if "STARTTLS" not in session.capabilities:
        raise ActionFailed(f'{session.where}: the server offers no STARTTLS; use tls = "implicit"')
    proto = session.client.protocol
    command = aioimaplib.Command("STARTTLS", proto.new_tag(), loop=proto.loop)
    await session._ok("STARTTLS", proto.execute(command))
    try:
        transport = await proto.loop.start_tls(
            proto.transport, proto, context, server_hostname=host
        )
    except (ssl.SSLError, OSError) as e:
        raise ActionFailed(f"{session.where}: TLS failed after STARTTLS: {e}") from None
    proto.transport = transport
    await session._ok("CAPABILITY", _capability(session.client))


def open_mailbox(
    cfg: ImapSource,
    *,
    timeout_s: float | None = None,
    secrets: Callable[[str], str | None] = secret,
) -> contextlib.AbstractAsyncContextManager[Session]:
    """A logged-in session on an imap source's server (its password looked up by name now)."""
    password = secrets(cfg.password_env)
    if password is None:
        raise ActionFailed(f"${cfg.password_env} (the IMAP password for {cfg.user}) is not set")
    return connect(
        cfg.host, cfg.port, cfg.tls, cfg.user, password,
        timeout_s=timeout_s or cfg.timeout_s, ca_file=cfg.ca_file,
    )  # fmt: skip


def _drop(client: aioimaplib.IMAP4) -> None:
    """Close a client's socket now, and stop a connect still under way from opening one."""
    connecting = client._client_task
    if not connecting.done():
        connecting.cancel()
    transport = client.protocol.transport
    if transport is not None and not transport.is_closing():
        transport.close()


def _uid_set(uids: list[int]) -> str:
    return ",".join(str(u) for u in uids)


def _parse_fetch(lines: list[bytes], max_bytes: int) -> list[Fetched]:
    """aioimaplib hands a FETCH answer as lines: `N FETCH (… {size}`, the literal, then `)` or
    more attributes; a message without a literal (an empty part) has none."""
    out: list[Fetched] = []
    i = 0
    while i < len(lines):
        head = lines[i]
        i += 1
        if not _FETCH_HEAD.match(head):
            continue
        raw = b""
        tail = b""
        if head.rstrip().endswith(b"}") and i < len(lines):
            raw = lines[i][:max_bytes]
            i += 1
            if i < len(lines) and not _FETCH_HEAD.match(lines[i]):
                tail = lines[i]
                i += 1
        attrs = head + b" " + tail
        uid = _UID.search(attrs)
        if uid is None:
            continue
        size = _SIZE.search(attrs)
        flags = _FLAGS.search(attrs)
        date = _DATE.search(attrs)
        out.append(
            Fetched(
                uid=int(uid.group(1)),
                flags=tuple(flags.group(1).decode(errors="replace").split()) if flags else (),
                size=int(size.group(1)) if size else len(raw),
                internaldate=date.group(1).decode(errors="replace") if date else "",
                raw=raw,
            )
        )
    return out
