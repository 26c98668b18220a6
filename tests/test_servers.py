"""tests/servers.py, the real servers' common plumbing: skip loudly or fail when required, one
banner per server whose tests were skipped (from the skip reports, so under xdist too), waits
that end as soon as the server's process exits."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from tests import servers

BROWSER = "REAL-BROWSER TEST SKIPPED: missing Debian's `chromium`; install it"


class Reporter:
    def __init__(self, skipped: list[Any]) -> None:
        self.stats = {"skipped": skipped}
        self.lines: list[str] = []

    def write_sep(self, sep: str, title: str, **markup: Any) -> None:
        self.lines.append(title)

    def write_line(self, line: str, **markup: Any) -> None:
        self.lines.append(line)


def skip_report(reason: str) -> Any:
    return SimpleNamespace(longrepr=("tests/x.py", 1, f"Skipped: {reason}"))


def test_a_skipped_server_test_is_bannered_from_the_reports_as_an_xdist_controller_sees_them() -> (
    None
):
    # The controller of an xdist run only has the workers' reports: the old browser banner
    # counted in the process that skipped, and said nothing there.
    reporter = Reporter([skip_report(BROWSER), skip_report(BROWSER), skip_report("other")])
    servers.pytest_terminal_summary(reporter)
    assert reporter.lines == ["2 real-browser test(s) skipped", BROWSER]


def test_no_banner_without_a_server_skip() -> None:
    reporter = Reporter([skip_report("root writes through file permissions")])
    servers.pytest_terminal_summary(reporter)
    assert reporter.lines == []


def test_a_missing_server_skips_or_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    servers.require(None, "DOVECOT")  # present: nothing happens
    reason = "DOVECOT TEST SKIPPED: Debian's dovecot-imapd is not installed"
    monkeypatch.delenv("AGENTD_REQUIRE_DOVECOT", raising=False)
    with pytest.raises(pytest.skip.Exception, match="DOVECOT TEST SKIPPED"):
        servers.require(reason, "DOVECOT")
    monkeypatch.setenv("AGENTD_REQUIRE_DOVECOT", "1")
    with pytest.raises(pytest.fail.Exception, match=r"DOVECOT TEST FAILED \(AGENTD_REQUIRE_DOV"):
        servers.require(reason, "DOVECOT")


def test_a_wait_ends_when_the_server_exits_and_says_its_log() -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(RuntimeError, match=r"(?s)the server exited \(3\).*bad config"):
        servers.wait_until(
            lambda: False, "the server", process=child, log=lambda: "bad config", within_s=600
        )


def test_a_free_port_is_not_listening_and_a_started_server_is() -> None:
    port = servers.free_port()
    assert not servers.listening(port)
    child = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        servers.wait_until(lambda: servers.listening(port), "http.server", process=child)
    finally:
        servers.stop_process(child)
    assert child.returncode is not None
