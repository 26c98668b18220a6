"""Dovecot fixtures (tests/dovecot_server.py): a throw-away IMAP server per test that asks for one.

Where Debian's dovecot-imapd is missing these tests are skipped with a reason that says how to
install it, and a banner at the end of the run repeats it; with AGENTD_REQUIRE_DOVECOT=1 (set by
`.ci/run`) they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dovecot_server import Dovecot, missing_reason

PASSWORD_ENV = "AGENTD_TEST_IMAP_PASSWORD"
BANNER_MARK = "DOVECOT TEST SKIPPED"


def _skip_or_fail_if_missing() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("AGENTD_REQUIRE_DOVECOT") == "1":
        pytest.fail(reason.replace("SKIPPED", "FAILED (AGENTD_REQUIRE_DOVECOT=1)"), pytrace=False)
    pytest.skip(reason)


def _started(
    monkeypatch: pytest.MonkeyPatch, *, idle: bool = True, tls: bool = False
) -> Iterator[Dovecot]:
    _skip_or_fail_if_missing()
    server = Dovecot.start(idle=idle, tls=tls)
    monkeypatch.setenv(PASSWORD_ENV, server.password)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dovecot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dovecot]:
    """A running Dovecot with IDLE; its test user's password in $AGENTD_TEST_IMAP_PASSWORD."""
    yield from _started(monkeypatch, idle=True)


@pytest.fixture
def dovecot_no_idle(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dovecot]:
    """A running Dovecot that does not offer IDLE (clients must poll)."""
    yield from _started(monkeypatch, idle=False)


@pytest.fixture
def dovecot_tls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dovecot]:
    """A running Dovecot with TLS: STARTTLS on `port`, implicit TLS on `imaps_port`; its
    self-signed certificate (for 127.0.0.1) is `dir / "cert.pem"`."""
    yield from _started(monkeypatch, tls=True)


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner a skipped Dovecot test cannot hide behind (it reads the skip reports, so it works
    under xdist too)."""
    count = 0
    reason = ""
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if BANNER_MARK in text:
            count += 1
            reason = text[text.index(BANNER_MARK) :]
    if count:
        terminalreporter.write_sep("!", f"{count} Dovecot test(s) skipped", red=True, bold=True)
        terminalreporter.write_line(reason, red=True, bold=True)
