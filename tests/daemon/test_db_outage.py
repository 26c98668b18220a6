"""A real daemon rides out its PostgreSQL database's bad minutes (issue 31, items 1 and 3), through a TCP
proxy (tests/tcp_proxy.py) to the test's cluster:

(1) Connections reset for ~3 s, then the server stopped (`pg_ctl stop -m fast`) for 5 s and started
    again, while runs execute: the daemon stays up, says `db.unreachable` once per outage and
    `db.reachable` after it, a CLI write meanwhile gets one clear sentence (no traceback), and every
    run finishes with each effect once.
(2) The database stalls (the proxy blackholes: TCP up, no answer): SIGTERM ends the daemon anyway,
    with exit status 1 and a line that says why, instead of hanging on the stuck writer.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentd.config import Paths
from agentd.db import queries as q
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.store import SyncStore
from agentd.models import RunStatus
from tests.daemon.test_multi_daemon import Daemon, wait_for
from tests.daemon.test_multi_daemon_chaos import WORDS, write_home
from tests.pg_cluster import Cluster
from tests.tcp_proxy import Proxy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
RUNS = 4


@pytest.fixture
def proxied(pg_cluster: Cluster, pg_url: str) -> Any:
    """(proxy, URL through it) to the test's database."""
    proxy = Proxy(pg_cluster.socket).start()
    try:
        yield proxy, proxy.url(pg_url.split("/")[3].split("?")[0])
    finally:
        proxy.close()


def start_runs(store: SyncStore, n: int) -> list[int]:
    def work(c: Any) -> list[int]:
        runs = []
        for i in range(n):
            goal = q.add_goal(c, title=f"g{i}", why="outage", agent="default", criteria=[],
                              deadline=None)  # fmt: skip
            runs.append(q.create_run(c, goal_id=goal, agent="default", trigger="test"))
        return runs

    return store.write(work)


def finished(store: SyncStore, run_ids: list[int]) -> bool:
    return all(store.read(functools.partial(q.get_run, run_id=r)).status.finished for r in run_ids)


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def waited(cond: Any, what: str, daemon: Daemon, timeout_s: float = 60) -> Any:
    """`wait_for`, and when it times out, every thread's stack of the daemon (SIGUSR1) with it."""
    try:
        return wait_for(cond, what, daemon, timeout_s=timeout_s)
    except AssertionError as e:
        if gone(daemon) is not None:
            raise
        before = len(daemon.log())
        os.kill(daemon.pid, signal.SIGUSR1)
        wait_for(lambda: "most recent call first" in daemon.log()[before:], "stacks", daemon)
        time.sleep(0.5)  # the rest of the dump
        raise AssertionError(f"{e}\n--- thread stacks:\n{daemon.log()[before:]}") from None


def gone(daemon: Daemon) -> int | None:
    """The daemon's exit status if it ended, else None."""
    assert daemon.proc is not None
    return daemon.proc.poll()


def test_a_daemon_rides_out_resets_and_a_server_restart(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster, proxied: tuple[Proxy, str]
) -> None:
    proxy, url = proxied
    effects = tmp_path / "effects.txt"
    write_home(tmp_path / "a", url, effects)
    daemon = Daemon(tmp_path / "a")
    store = SyncStore(Paths(tmp_path / "x").db, backend=PostgresBackend(pg_url, tmp_path))
    try:
        daemon.start()
        run_ids = start_runs(store, RUNS)
        wait_for(lambda: effects.exists(), "a first effect", daemon)

        proxy.reset()  # every connection reset, new ones refused, for ~3 s
        time.sleep(3)
        proxy.resume()
        waited(lambda: gone(daemon) or daemon.events("db.reachable"), "reconnected", daemon)
        assert not gone(daemon), f"the daemon exited (status {gone(daemon)}) on a 3 s reset"

        store.close()
        pg_cluster.stop_server()  # a restart: down for 5 s
        back_at = time.monotonic() + 5
        try:
            waited(lambda: len(daemon.events("db.unreachable")) >= 2, "noticed", daemon)
            wrote = cli(
                tmp_path / "a", "goal", "add", "during", "--why", "outage", "--agent", "default"
            )
            status = cli(tmp_path / "a", "status")
            time.sleep(max(0.0, back_at - time.monotonic()))
        finally:
            pg_cluster.start_server()
        assert status.returncode != 0 and "Traceback" not in status.stderr, status.stderr
        assert "is up and waiting: the database" in status.stderr, status.stderr
        store = SyncStore(Paths(tmp_path / "x").db, backend=PostgresBackend(pg_url, tmp_path))
        assert wrote.returncode != 0 and "Traceback" not in wrote.stderr, wrote.stderr
        assert url.split("@")[1].split("/")[0] in wrote.stderr, wrote.stderr  # names the database
        waited(lambda: gone(daemon) or len(daemon.events("db.reachable")) >= 2, "back", daemon)
        assert not gone(daemon), f"the daemon exited (status {gone(daemon)}) on a restart"
        waited(lambda: finished(store, run_ids), "every run to finish", daemon, timeout_s=120)
        assert daemon.proc is not None and daemon.proc.poll() is None  # it stayed up
    finally:
        daemon.stop()
        store.close()
    assert daemon.proc.returncode == 0
    # Said once per outage: two outages, two of each (not one per failed tick or attempt).
    assert len(daemon.events("db.unreachable")) == 2
    assert len(daemon.events("db.reachable")) == 2
    assert not daemon.events("scheduler.tick_failed")
    store = SyncStore(Paths(tmp_path / "x").db, backend=PostgresBackend(pg_url, tmp_path))
    runs = [store.read(functools.partial(q.get_run, run_id=r)) for r in run_ids]
    store.close()
    assert Counter(r.status for r in runs) == {RunStatus.SUCCEEDED: RUNS}
    lines = [ln.split() for ln in effects.read_text().splitlines()]
    per_run_word = Counter((key.split(":")[-2], word) for key, word in lines)
    assert all(n == 1 for n in per_run_word.values()), per_run_word.most_common(3)
    assert len(per_run_word) == RUNS * len(WORDS)


def test_a_stop_during_a_stall_ends_with_status_1_and_says_why(
    tmp_path: Path, proxied: tuple[Proxy, str]
) -> None:
    proxy, url = proxied
    effects = tmp_path / "effects.txt"
    write_home(tmp_path / "a", url, effects)
    daemon = Daemon(tmp_path / "a")
    daemon.start()
    try:
        proxy.blackhole()  # TCP up, nothing answers: the writer's batch waits
        wait_for(lambda: daemon.events("lease.fenced"), "the daemon to fence itself", daemon)
        os.kill(daemon.pid, signal.SIGTERM)
        assert daemon.proc is not None
        try:
            code = daemon.proc.wait(timeout=150)  # bounded: ~2 deadlines and a reconnection
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not end a daemon whose database stalls (150 s)")
    finally:
        proxy.resume()
        daemon.stop()
    assert code == 1
    assert daemon.events("db.deadline")  # the stuck statement was cut, not waited for
    (said,) = daemon.events("daemon.stop_unfinished")
    assert "unreachable" in said["error"] or "did not answer" in said["error"], said
