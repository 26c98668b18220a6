"""The listener's wait (issue 35's idle cost): it sleeps on its socket until something arrives,
and the scheduler trusts it — while it says it is connected, the daemon no longer polls for
changes. So it must keep listening on a socket of any number (a daemon raises its open-file limit
past select()'s 1,024), and hand over at once a notification that a probe's round trip read into
psycopg's backlog while its socket stays empty."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agentd.db.postgres import listener as listening
from agentd.db.postgres.listener import Listener
from tests.db.test_listener import Woken, wait_until


def _notify(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("NOTIFY agentd_wake")


@pytest.fixture
def many_open_files() -> Iterator[None]:
    """More than 1,024 descriptors open, so the listener's socket is numbered past select()'s."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1_300:
        pytest.skip(f"the open-file limit is {hard}: a socket numbered past 1,024 cannot be had")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4_096) if hard == resource.RLIM_INFINITY
                                                else min(hard, 4_096), hard))  # fmt: skip
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1_100)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_listener_whose_socket_is_numbered_past_1024_keeps_listening(
    pg_url: str, many_open_files: None
) -> None:
    woken = Woken()
    listener = Listener(pg_url, woken)
    listener.start()
    try:
        wait_until(lambda: woken.count == 1, "the look after connecting")
        _notify(pg_url)
        wait_until(lambda: woken.count == 2, "the notification")
        assert listener.connected.is_set() and listener._thread is not None
        assert listener._thread.is_alive()
    finally:
        listener.stop()


def test_a_notification_read_with_a_probe_wakes_at_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listening, "PROBE_S", 0.2)  # the first probe soon
    woken = Woken()
    listener = Listener(pg_url, woken)
    execute = psycopg.Connection.execute

    def probing(self: psycopg.Connection[Any], query: Any, *args: Any, **kw: Any) -> Any:
        if query == "SELECT 1" and self.info.backend_pid == listener.backend_pid:
            # A commit's NOTIFY arriving during the probe's round trip: psycopg reads it with the
            # probe's result, and the socket stays empty. No probe comes after this one for an
            # hour: only the backlog itself can hand the notification over.
            monkeypatch.setattr(listening, "PROBE_S", 3600.0)
            execute(self, "NOTIFY agentd_wake")
        return execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", probing)
    listener.start()
    try:
        wait_until(lambda: woken.count == 2, "the notification read with the probe")
        assert listener.notifications == 1
    finally:
        listener.stop()
