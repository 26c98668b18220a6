"""Wake-ups between processes sharing one PostgreSQL database never depend on LISTEN (issue 21,
failure c): an answer given through the CLI of a home that has no daemon (nothing to poke) wakes
the run a real daemon left waiting —

- over NOTIFY, after the daemon's listener connection was terminated (it reconnects and looks
  again), well before its safety scan (set to a minute here);
- with LISTEN off, at the safety scan (set to 2 s here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.config import Paths
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.postgres.connection import connect
from agentd.db.store import SyncStore
from agentd.models import InboxKind, RunStatus
from tests.daemon.test_multi_daemon import Daemon, start_run, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def write_home(home: Path, url: str, *, listen: bool, safety_scan_s: float) -> None:
    home.mkdir()
    replies = [
        {"action": {"kind": "ask", "question": "Which region?"}},
        {"action": {"kind": "finish", "outcome": "succeeded", "summary": "answered"}},
    ]
    (home / "replies.json").write_text(json.dumps(replies))
    (home / "config.toml").write_text(
        textwrap.dedent(
            f"""
            [store]
            url = "{url}"
            lease_s = 3.0
            listen = {"true" if listen else "false"}

            [api]
            safety_scan_s = {safety_scan_s}

            [models.default]
            provider = "scripted"
            replies = "replies.json"

            [agents.default]
            actions = ["ask", "finish"]
            """
        )
    )


def cli(home: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("listen", [True, False], ids=["notify-after-reconnect", "listen-off"])
def test_an_answer_from_a_daemonless_cli_wakes_the_run(
    tmp_path: Path, pg_url: str, listen: bool
) -> None:
    served, remote = tmp_path / "served", tmp_path / "remote"
    write_home(served, pg_url, listen=listen, safety_scan_s=60.0 if listen else 2.0)
    write_home(remote, pg_url, listen=listen, safety_scan_s=60.0)
    store = SyncStore(Paths(served).db)
    daemon = Daemon(served)
    try:
        daemon.start()
        run_id = start_run(store)

        def question() -> Any:
            items = store.read(lambda c: qi.list_items(c, status="open"))
            return next((i for i in items if i.kind == InboxKind.QUESTION), None)

        item = wait_for(question, "the run's question", daemon)
        wait_for(
            lambda: store.read(lambda c: q.get_run(c, run_id)).status == RunStatus.WAITING,
            "the run waits",
            daemon,
        )
        if listen:
            cut_the_listener(pg_url)
            wait_for(lambda: len(daemon.events("listener.connected")) >= 2, "reconnect", daemon)
        answered = time.monotonic()
        cli(remote, "inbox", "answer", str(item.item_id), "eu-west")
        wait_for(
            lambda: store.read(lambda c: q.get_run(c, run_id)).status == RunStatus.SUCCEEDED,
            "the answered run finishes",
            daemon,
            timeout_s=40,  # below the 60 s safety scan: with LISTEN on, only NOTIFY can do it
        )
        print(f"answer -> run finished ({'NOTIFY' if listen else 'scan'}): "
              f"{time.monotonic() - answered:.2f}s")  # fmt: skip
    finally:
        daemon.stop()
        store.close()


def cut_the_listener(url: str) -> None:
    """Terminate every listener backend of the database (what a failover or an admin does)."""
    conn = connect(url)
    try:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'agentd-listener' AND datname = current_database()"
        ).fetchall()
        assert rows, "no listener connected"
    finally:
        conn.close()
