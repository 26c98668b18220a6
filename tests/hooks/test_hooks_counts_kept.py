"""A hook's counts survive a restart (review of issue 29, item 4): a real `agentd serve` takes
deliveries and refusals, stops (SIGTERM: the refusals not yet written are written) and starts
again; `agentd hooks` shows the same counts from the new daemon, and from the database while
none runs. After a SIGKILL the accepted ones are still counted: each is counted in the
transaction that records its events. The first version kept them in the daemon's memory only."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import closed_port
from tests.daemon.test_daemon import FINISH, Daemon, cli
from tests.hooks.test_hooks_crash import HOOK, TOKEN, deliver

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def counts(home: Path) -> tuple[int, int, int]:
    shown = cli(home, "hooks", "--json")
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)
    return row["accepted"], row["recorded"], row["refused"]


def asked(home: Path, port: int) -> tuple[int, int, int]:
    """The running daemon's counts (`/api/hooks`, what `agentd hooks` shows while it runs)."""
    import http.client

    token = (home / "api.token").read_text().strip()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/api/hooks", headers={"Authorization": f"Bearer {token}"})
        row = json.loads(conn.getresponse().read())["hooks"]["tok"]
    finally:
        conn.close()
    return row["accepted"], row["recorded"], row["refused"]


def refused(port: int) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/hooks/tok", body="{}", headers={"Authorization": "Bearer no"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_hooks_counts_survive_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    port = closed_port()
    daemon = Daemon(tmp_path / "home")
    try:
        daemon.write([FINISH], daemon=HOOK.format(port=port))
        proc = daemon.serve()
        assert [deliver(port, m) for m in ("a", "b", "a")] == [200, 200, 200]
        assert [refused(port) for _ in range(3)] == [401] * 3
        assert asked(daemon.home, port) == (3, 2, 3)
        daemon.terminate(proc)
        assert counts(daemon.home) == (3, 2, 3)  # no daemon: as written
        proc = daemon.serve()
        assert asked(daemon.home, port) == (3, 2, 3)
        assert deliver(port, "c") == 200
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert counts(daemon.home)[:2] == (4, 3)  # accepted: counted with its events
    finally:
        daemon.kill_all()
