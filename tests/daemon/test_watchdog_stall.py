"""A shared database that stalls (TCP up, no answer) keeps the watchdog fed and says it waits, as an
outage does: the outage itself begins only once the client deadline (past the lease: 32 s by
default) cuts the stuck statement, and systemd's WatchdogSec (30 s in the unit) would otherwise
kill a daemon that was only waiting for its database. A file that stalls still starves it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentd.daemon.watchdog import watchdog


class StalledStore:
    def __init__(self, path: Path, shared: bool) -> None:
        self.path = path
        self.outage = None
        self.backend = SimpleNamespace(shared=shared, label="db@host")
        self.errors = SimpleNamespace(failing=lambda: False)

    async def read(self, work: Any) -> Any:
        await asyncio.Event().wait()  # no answer, ever


async def said_until(sock: socket.socket, done: Callable[[list[str]], bool]) -> list[str]:
    """What the daemon said to systemd, until `done` (at most 60 s: a loaded machine)."""
    got: list[str] = []
    deadline = asyncio.get_running_loop().time() + 60
    while not done(got) and asyncio.get_running_loop().time() < deadline:
        try:
            got.append(sock.recv(300).decode())
        except BlockingIOError:
            await asyncio.sleep(0.02)
    return got


@pytest.mark.parametrize("shared", [True, False])
async def test_a_stalled_database_feeds_the_watchdog_only_when_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    db = tmp_path / "agentd.db"
    db.write_text("")
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        deps = SimpleNamespace(
            store=StalledStore(db, shared),
            config=SimpleNamespace(daemon=SimpleNamespace(watchdog_interval_s=0.05)),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(watchdog(deps, stop, []))  # type: ignore[arg-type]
        try:
            with capture_logs() as logs:
                if shared:  # fed, and says why it waits
                    got = await said_until(sock, lambda m: "WATCHDOG=1" in m and len(m) >= 2)
                else:  # three probes unanswered: said unhealthy each time, never fed
                    got = await said_until(
                        sock, lambda m: sum(e["event"] == "daemon.unhealthy" for e in logs) >= 3
                    )
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    if shared:
        assert "WATCHDOG=1" in got, got
        assert any(
            m.startswith("STATUS=waiting: the database db@host has not answered") for m in got
        )
    else:
        assert "WATCHDOG=1" not in got, got
