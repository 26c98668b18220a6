"""The LISTEN side of wake-ups (agentd/db/postgres/listener.py, agentd/db/wake.py) on a real
PostgreSQL server: a CLI commit wakes a listener once however many of its writes notify, a
terminated listener backend reconnects and looks again, and nothing is sent on SQLite."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import wake
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.postgres.connection import connect
from agentd.db.postgres.listener import Listener
from agentd.db.store import SyncStore


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Woken:
    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.count += 1


@pytest.fixture
def listening(pg_url: str, tmp_path: Any) -> Iterator[tuple[Listener, Woken, SyncStore]]:
    backend = PostgresBackend(pg_url, tmp_path)
    store = SyncStore(tmp_path / "agentd.db", backend=backend)
    woken = Woken()
    listener = backend.listener(woken, None)
    wait_until(listener.connected.is_set, "the listener connects")
    wait_until(lambda: woken.count == 1, "the look after connecting")
    yield listener, woken, store
    listener.stop()
    store.close()


def test_a_cli_commit_wakes_the_listener_once(
    listening: tuple[Listener, Woken, SyncStore],
) -> None:
    listener, woken, store = listening

    def work(c: Any) -> None:
        for n in range(5):  # five writes that notify, one transaction: one notification
            qi.add_event(c, "ping", {"n": n}, f"k{n}")
        wake.notify_peers(c)

    store.write(work)
    wait_until(lambda: woken.count == 2, "the notification")
    store.read(lambda c: c.execute("SELECT pg_sleep(0.3)").fetchone())  # anything more arrives
    assert (listener.notifications, woken.count) == (1, 2)


def test_a_terminated_listener_reconnects_and_looks_again(
    listening: tuple[Listener, Woken, SyncStore], pg_url: str
) -> None:
    listener, woken, store = listening
    first_pid = listener.backend_pid
    admin = connect(pg_url)
    try:
        admin.execute("SELECT pg_terminate_backend(?)", (first_pid,))
    finally:
        admin.close()
    wait_until(lambda: listener.connects == 2, "the reconnect")
    assert listener.backend_pid != first_pid
    wait_until(lambda: woken.count == 2, "the look after reconnecting")
    store.write(lambda c: wake.notify_peers(c))
    wait_until(lambda: woken.count == 3, "a notification on the new connection")


@pytest.mark.backends("sqlite")
def test_nothing_notifies_on_sqlite(home: Any) -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    statements: list[str] = []
    conn = home.store.conn
    conn.set_trace_callback(statements.append)
    home.store.write(lambda c: qi.add_event(c, "ping", {}, "k"))
    assert statements and not [s for s in statements if "notify" in s.lower()]
    assert home.backend().listener(lambda: None, None) is None


def test_doctor_counts_the_listeners_of_the_live_daemons(pg_url: str, tmp_path: Any) -> None:
    from agentd.db import leases
    from agentd.db.postgres import checks

    def listener_check() -> checks.Finding:
        (found,) = [f for f in checks.examine(pg_url, 30.0) if f.name == "listener"]
        return found

    backend = PostgresBackend(pg_url, tmp_path)
    store = SyncStore(tmp_path / "agentd.db", backend=backend)
    try:
        store.write(
            lambda c: leases.register(c, owner="h:1:x", host="h", pid=1, version="v", lease_s=30)
        )
        down = listener_check()
        assert (down.ok, down.warning) == (False, True) and "0 listening for 1" in down.message
        listener = backend.listener(lambda: None, None)
        try:
            wait_until(listener.connected.is_set, "the listener connects")
            up = listener_check()
            assert up.ok and "1 listening for 1 live daemon" in up.message
        finally:
            listener.stop()
        off = [f for f in checks.examine(pg_url, 30.0, listen=False) if f.name == "listener"]
        assert off[0].ok and "LISTEN off" in off[0].message
    finally:
        store.close()
