"""1,000 deliveries in a burst from 50 concurrent senders on a real `agentd serve` (issue 29):
each is recorded once, and the daemon's runs go on meanwhile — an approval given during the burst
executes (how long it took is printed; bench/hooks.py measures it properly)."""

from __future__ import annotations

import http.client
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentd.db import items as qi
from tests.conftest import closed_port
from tests.daemon.test_daemon import FINISH, Daemon, act, cli
from tests.hooks.test_hooks_crash import HOOK, TOKEN, deliver

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
DELIVERIES = 1000
SENDERS = 50


def test_hooks_a_burst_is_recorded_once_and_runs_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    port, out = closed_port(), tmp_path / "touched"
    daemon = Daemon(tmp_path / "home")
    try:
        touch = f'type = "command"\nargv = ["touch", "{out}"]\n'
        daemon.write([act("touch"), FINISH], {"touch": touch}, daemon=HOOK.format(port=port))
        with daemon.paths.config.open("a") as f:
            f.write('\n[agents.default.policy]\nrules = { touch = "approve" }\n')
        daemon.serve()
        run_id = daemon.new_run()
        (item,) = daemon.until("the approval", daemon.open_items)
        started = threading.Event()
        statuses: list[int | None] = []
        local = threading.local()  # each sender keeps its connection alive, as Alertmanager does
        kept: list[http.client.HTTPConnection] = []

        def one(n: int) -> None:
            started.set()
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                kept.append(local.conn)
            statuses.append(deliver(port, f"b-{n}", local.conn))

        with ThreadPoolExecutor(SENDERS) as pool:
            burst = [pool.submit(one, n) for n in range(DELIVERIES)]
            started.wait(10)
            approved_at = time.monotonic()
            assert cli(daemon.home, "inbox", "approve", str(item.item_id)).returncode == 0
            daemon.until("the approved action", out.exists, 60)
            took = time.monotonic() - approved_at
            still = sum(not f.done() for f in burst)
            for f in burst:
                f.result()
        for conn in kept:
            conn.close()
        print(f"approval executed {took:.2f} s after approving; {still} deliveries still in flight")
        assert statuses.count(200) == DELIVERIES, sorted(set(map(str, statuses)))
        events = daemon.store.read(lambda c: qi.list_events(c, 1_000_000))
        assert sorted(e.dedupe_key or "" for e in events) == sorted(
            f"hook:tok:b-{n}" for n in range(DELIVERIES)
        )
        daemon.until("the run finished", lambda: daemon.run(run_id).status == "succeeded", 60)
    finally:
        daemon.kill_all()
