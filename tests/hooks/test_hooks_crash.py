"""A real `agentd serve` SIGKILLed while deliveries arrive (issue 29): every delivery that got a
2xx is recorded, once, after the restart (the answer follows the commit); a sender that got no
answer sends again and its delivery is recorded once too (its id is the dedupe key)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from agentd.db import items as qi
from tests.conftest import closed_port
from tests.daemon.test_daemon import FINISH, Daemon

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
TOKEN = "crash-token-0123456789"
HOOK = """
[api]
port = {port}

[hooks.tok]
type = "json"
token_env = "HOOK_TOKEN"
event = "deploy"
rate_per_minute = 1000000
"""
SENDERS = 8


def deliver(port: int, msg_id: str, kept: http.client.HTTPConnection | None = None) -> int | None:
    """One delivery (on `kept`, else a connection of its own); its status, or None when the
    connection failed (no answer)."""
    conn = kept or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}", "webhook-id": msg_id,
                   "Content-Type": "application/json"}  # fmt: skip
        conn.request("POST", "/hooks/tok", body=json.dumps({"id": msg_id}), headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        if kept is None:
            conn.close()


def test_hooks_every_acknowledged_delivery_survives_a_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    port = closed_port()
    daemon = Daemon(tmp_path / "home")
    try:
        daemon.write([FINISH], daemon=HOOK.format(port=port))
        proc = daemon.serve()
        acked: list[str] = []
        tried: list[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        def sender(n: int) -> None:
            for i in range(100_000):
                if stop.is_set():
                    return
                msg_id = f"s{n}-{i}"
                with lock:
                    tried.append(msg_id)
                status = deliver(port, msg_id)
                if status is None:
                    return  # the daemon is gone
                if 200 <= status < 300:
                    with lock:
                        acked.append(msg_id)

        threads = [threading.Thread(target=sender, args=(n,)) for n in range(SENDERS)]
        for t in threads:
            t.start()
        daemon.until("deliveries acknowledged", lambda: len(acked) >= 100, 60)
        os.killpg(proc.pid, signal.SIGKILL)  # mid-burst: some deliveries are half-way
        proc.wait()
        stop.set()
        for t in threads:
            t.join(30)

        daemon.serve()  # restarted: what was committed is there, nothing twice
        keys = [e.dedupe_key for e in daemon.store.read(lambda c: qi.list_events(c, 1_000_000))]
        assert len(keys) == len(set(keys))
        missing = {f"hook:tok:{m}" for m in acked} - set(keys)
        assert not missing, f"{len(missing)} acknowledged deliveries lost: {sorted(missing)[:5]}"
        # Senders retry what got no answer: each is recorded once.
        assert all(deliver(port, m) == 200 for m in tried)
        keys = [e.dedupe_key for e in daemon.store.read(lambda c: qi.list_events(c, 1_000_000))]
        assert sorted(keys) == sorted({f"hook:tok:{m}" for m in tried})
    finally:
        daemon.kill_all()
