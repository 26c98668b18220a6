"""PostgreSQL connections: the session settings every connection gets (UTC, a lock timeout, an idle
transaction timeout below the run lease, an application name), jsonb read back as text (rows.py
decodes JSON itself, as on SQLite), and the Conn the queries are written against, which rewrites
their `?` placeholders to psycopg's `%s` once per statement text.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.conninfo
from psycopg.types.string import TextLoader

from agentd.db.conn import Conn, Cursor
from agentd.db.dialect import POSTGRES, Dialect
from agentd.errors import StateError

LOCK_TIMEOUT_MS = 5000  # as SQLite's busy timeout: a lock wait this long is an error, not a hang
DEFAULT_LEASE_S = 30.0  # [store] lease_s's default (config/store.py)
# A connection that cannot be made, or a peer that went silent (a partition, a dead host), is an
# error within seconds, not after the kernel's TCP retries (~15 min): a renewal, a write or the
# listener's probe must fail in time to fence or reconnect. (Ignored on a unix socket.)
NETWORK_SETTINGS: dict[str, Any] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    # Keepalives stay silent while a statement waits for the server's answer: a peer gone then
    # is an error after this long, not the kernel's retransmissions (libpq 12+; psycopg[binary]
    # ships a newer one).
    "tcp_user_timeout": 30_000,
}


def statement_timeout_ms(lease_s: float) -> int:
    """A statement the server has not answered within the lease (at least 5 s) is cancelled by
    the server: one that outlasts the lease holds its locks past the fence anyway. Migrations and
    `store copy` lift it for themselves."""
    return int(max(5.0, lease_s) * 1000)


def batch_deadline_s(lease_s: float) -> float:
    """The writer's own deadline for one batch, past the server's statement timeout: a database
    that stalls with its TCP connection up (a frozen server or host, a blackholed route) answers
    nothing, cancels included, so the writer cuts the connection (PostgresConn.abort)."""
    return statement_timeout_ms(lease_s) / 1000 + 2.0


def idle_in_transaction_ms(lease_s: float) -> int:
    """A paused daemon (SIGSTOP, a frozen VM) must not hold row locks past its lease: the server
    ends a session idle inside a transaction after a third of the lease (at most 5 s: agentd never
    waits inside a transaction), so another daemon can take its runs over in time."""
    return int(max(0.5, min(5.0, lease_s / 3)) * 1000)


@functools.lru_cache(maxsize=1024)
def placeholders(sql: str) -> str:
    """`sql` with each `?` outside a string literal as `%s`, and every `%` doubled (psycopg reads
    `%` as the start of a placeholder, inside literals too: LIKE 'a%')."""
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted  # '' inside a literal toggles twice: still inside
        if ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


class PostgresConn:
    """A psycopg connection (autocommit: the stores BEGIN and COMMIT themselves) as a Conn."""

    dialect: Dialect = POSTGRES
    IntegrityError: type[Exception] = psycopg.IntegrityError

    def __init__(self, raw: psycopg.Connection[Any], *, session_timeout_ms: int = 0) -> None:
        self.raw = raw
        self.session_timeout_ms = session_timeout_ms  # its statement_timeout (0: none)
        # What its write transactions are bounded by, when the session is not (the CLI's)
        self.write_timeout_ms: int | None = None
        self._memo: dict[str, Any] = {}

    @property
    def memo(self) -> dict[str, Any] | None:
        """What a query reads once per transaction (the home's clock record, db/stamp.py):
        empty at each BEGIN, None outside a transaction (each statement its own)."""
        return self._memo if self.in_transaction else None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        # Without parameters psycopg reads no placeholders (and may run several statements).
        if not parameters:
            if sql.startswith("BEGIN"):
                self._memo = {}
            return self.raw.execute(sql)
        return self.raw.execute(placeholders(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        cur = self.raw.cursor()
        cur.executemany(placeholders(sql), parameters)
        return cur

    def close(self) -> None:
        self.raw.close()

    def abort(self) -> None:
        """From another thread: cut the connection under a statement that waits for an answer
        that is not coming (the blocked call raises at once; the connection is then broken)."""
        import socket

        with contextlib.suppress(Exception):
            fd = self.raw.pgconn.socket
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


# The connection parameters that carry a secret: each is left out of a URL's label, and each
# value is blotted out of any driver message (libpq quotes a bad parameter back verbatim).
SECRET_PARAMS = frozenset({"password", "sslpassword"})
SHORTEST_BLOTTED = 3  # a shorter secret would blot out ordinary words of the message


def label(url: str) -> str:
    """The URL as messages name it: without its password (`user:password@`) or any parameter
    that carries a secret (`password=`, `sslpassword=`); the rest as written. A key=value
    connection string is shown with those parameters left out, or as `(a connection string)`."""
    if "://" not in url:
        return _dsn_label(url)
    parts = urllib.parse.urlsplit(url)
    query = parts.query.split("&") if parts.query else []
    kept = [p for p in query if urllib.parse.unquote(p.split("=")[0]) not in SECRET_PARAMS]
    netloc = parts.netloc
    if "@" in netloc:  # hosts as written: [::1], several (h1:5432,h2:5432)
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hosts}" if user else hosts
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="&".join(kept)))


def _dsn_label(dsn: str) -> str:
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(a connection string)"  # unparsable: nothing of it is shown
    kept = {k: v for k, v in params.items() if k not in SECRET_PARAMS and v is not None}
    return psycopg.conninfo.make_conninfo(**kept)  # type: ignore[arg-type]


def secrets(url: str) -> list[str]:
    """Every secret `url` carries, as written and decoded, longest first."""
    found: set[str] = set()
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            found.add(userinfo.split(":", 1)[1])
        for pair in parts.query.split("&"):
            name, _, value = pair.partition("=")
            if urllib.parse.unquote(name) in SECRET_PARAMS:
                found.add(value)
    else:
        for name in SECRET_PARAMS:  # key=value: quoted or bare, read without a parser (it may fail)
            for quoted, bare in re.findall(rf"\b{name}\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))", url):
                found.add(quoted.replace("\\'", "'").replace("\\\\", "\\") or bare)
    found |= {urllib.parse.unquote(v) for v in found}
    return sorted((v for v in found if len(v) >= SHORTEST_BLOTTED), key=len, reverse=True)


def redact(text: str, url: str) -> str:
    """`text` (a driver's message) with every secret of `url` blotted out."""
    for secret in secrets(url):
        text = text.replace(secret, "[redacted]")
    return text


def translate(error: Exception, url: str) -> StateError:
    """A psycopg error as a message naming the database (never its password)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return StateError(f"{label(url)}: {redact(text, url)}")


def connect(
    url: str,
    *,
    application_name: str = "agentd",
    lease_s: float = DEFAULT_LEASE_S,
    bounded: bool = True,
) -> PostgresConn:
    """A connection with agentd's session settings; raises StateError when it cannot connect.
    `bounded=False` (the CLI's): no statement timeout but in its write transactions (a long
    listing or export is never cancelled; a write holds locks the daemons wait on)."""
    timeout_ms = statement_timeout_ms(lease_s) if bounded else 0
    try:
        raw = psycopg.connect(
            url, autocommit=True, application_name=application_name, **NETWORK_SETTINGS
        )
    except psycopg.Error as e:
        raise translate(e, url) from None
    for name in ("json", "jsonb"):
        raw.adapters.register_loader(name, TextLoader)
    try:
        raw.execute("SET TIME ZONE 'UTC'")
        raw.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
        raw.execute(f"SET statement_timeout = {timeout_ms}")
        raw.execute(f"SET idle_in_transaction_session_timeout = {idle_in_transaction_ms(lease_s)}")
    except psycopg.Error as e:  # lost while setting the session up: a failed connect, said so
        raw.close()
        raise translate(e, url) from None
    conn = PostgresConn(raw, session_timeout_ms=timeout_ms)
    if not bounded:
        conn.write_timeout_ms = statement_timeout_ms(lease_s)
    return conn


if TYPE_CHECKING:  # mypy proves the queries' protocol holds for it
    _CONN: type[Conn] = PostgresConn
