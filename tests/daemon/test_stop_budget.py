"""A daemon on a shared database asks systemd for its stop's whole bound when it begins to stop:
the unit's TimeoutStopSec (30 s) is shorter than the bound on a stalled database (twice the writer's
batch deadline and a reconnection, past the lease), and systemd's SIGKILL would otherwise end the
stop before its status 1 and its daemon.stop_unfinished line. A home's SQLite file asks nothing."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentd.daemon import serve


def test_a_shared_store_asks_systemd_for_the_stops_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        shared = SimpleNamespace(backend=SimpleNamespace(batch_deadline_s=32.0))
        serve._ask_time_to_stop(shared, 10.0)  # type: ignore[arg-type]
        said = sock.recv(100).decode()
        assert said == f"EXTEND_TIMEOUT_USEC={(20 + 2 * 32 + 15 + 10) * 1_000_000}", said
        assert (2 * 32 + 15 + 10) > 30  # past the unit's TimeoutStopSec=30

        sock.setblocking(False)
        serve._ask_time_to_stop(
            SimpleNamespace(backend=SimpleNamespace(batch_deadline_s=None)), 10.0
        )  # type: ignore[arg-type]
        with pytest.raises(BlockingIOError):
            sock.recv(100)
