"""Dovecot fixtures (tests/dovecot_server.py): a throw-away IMAP server per test session (per
xdist worker) and kind (with IDLE, without, with TLS), started the first time a test asks for it
and stopped at the end; each test gets a mail user of its own on it (its own Maildir: nothing one
test delivers, moves or deletes is seen by another), all with one password.

Where Debian's dovecot-imapd is missing these tests are skipped with a reason that says how to
install it, and a banner at the end of the run repeats it (tests/servers.py); with
AGENTD_REQUIRE_DOVECOT=1 (set by `.ci/run`) they fail instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests import servers
from tests.dovecot_server import Dovecot, missing_reason

PASSWORD_ENV = "AGENTD_TEST_IMAP_PASSWORD"
BANNER_MARK = "DOVECOT TEST SKIPPED"
_users = itertools.count(1)


def _skip_or_fail_if_missing() -> None:
    servers.require(missing_reason(), "DOVECOT")


def _server(*, idle: bool = True, tls: bool = False) -> Iterator[Dovecot]:
    _skip_or_fail_if_missing()
    server = Dovecot.start(idle=idle, tls=tls)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def dovecot_server() -> Iterator[Dovecot]:
    """This test process's Dovecot with IDLE (its first user's handle)."""
    yield from _server(idle=True)


@pytest.fixture(scope="session")
def dovecot_no_idle_server() -> Iterator[Dovecot]:
    """This test process's Dovecot without IDLE."""
    yield from _server(idle=False)


@pytest.fixture(scope="session")
def dovecot_tls_server() -> Iterator[Dovecot]:
    """This test process's Dovecot with TLS."""
    yield from _server(tls=True)


def _own_user(server: Dovecot, monkeypatch: pytest.MonkeyPatch) -> Dovecot:
    monkeypatch.setenv(PASSWORD_ENV, server.password)
    return server.with_user(f"{Dovecot.user}{next(_users)}")


@pytest.fixture
def dovecot(dovecot_server: Dovecot, monkeypatch: pytest.MonkeyPatch) -> Dovecot:
    """A running Dovecot with IDLE, as a mail user of this test's own; the password in
    $AGENTD_TEST_IMAP_PASSWORD."""
    return _own_user(dovecot_server, monkeypatch)


@pytest.fixture
def dovecot_no_idle(dovecot_no_idle_server: Dovecot, monkeypatch: pytest.MonkeyPatch) -> Dovecot:
    """A running Dovecot that does not offer IDLE (clients must poll), as this test's own user."""
    return _own_user(dovecot_no_idle_server, monkeypatch)


@pytest.fixture
def dovecot_tls(dovecot_tls_server: Dovecot, monkeypatch: pytest.MonkeyPatch) -> Dovecot:
    """A running Dovecot with TLS: STARTTLS on `port`, implicit TLS on `imaps_port`; its
    self-signed certificate (for 127.0.0.1) is `dir / "cert.pem"`; as this test's own user."""
    return _own_user(dovecot_tls_server, monkeypatch)


def imap_source(server: Dovecot, name: str = "inbox", **keys: object) -> str:
    """The `[sources.NAME]` table of an imap source on `server` (plain IMAP on loopback)."""
    lines = [
        f"[sources.{name}]", 'type = "imap"', f'host = "{server.host}"', f"port = {server.port}",
        'tls = "none"', f'user = "{server.user}"', f'password_env = "{PASSWORD_ENV}"',
    ]  # fmt: skip
    for key, value in keys.items():
        spelled = str(value).lower() if isinstance(value, bool) else repr(value).replace("'", '"')
        lines.append(f"{key} = {spelled}")
    return "\n".join(lines) + "\n\n"
