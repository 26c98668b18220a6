"""Upgrades with mixed versions running (issue 21, item 6): a real daemon on a PostgreSQL database
that a newer agentd migrated under it logs a newer compatible migration and goes on, and stops
taking new runs at a breaking one; a new daemon refuses to start on the breaking schema."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentd.config import Paths
from agentd.db import queries as q
from agentd.db.postgres import schema
from agentd.db.postgres.connection import connect
from agentd.db.store import SyncStore
from tests.daemon.test_multi_daemon import Daemon, start_run, wait_for, write_home

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def newer_migration(url: str, *, breaking: bool) -> None:
    """What a newer agentd's migration leaves in the ledger."""
    conn = connect(url)
    try:
        version = schema.version(conn) + 1
        conn.execute(
            "INSERT INTO schema_migrations (version, name, breaking, applied_at)"
            " VALUES (?, ?, ?, extract(epoch from now()))",
            (version, f"from the future {version}", breaking),
        )
    finally:
        conn.close()


def test_a_newer_schema_is_logged_and_a_breaking_one_stops_claiming(
    tmp_path: Path, pg_url: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    write_home(tmp_path / "a", pg_url, shared)
    (shared / "fast").touch()
    store = SyncStore(Paths(tmp_path / "a").db)
    daemon = Daemon(tmp_path / "a")
    try:
        daemon.start()
        newer_migration(pg_url, breaking=False)
        wait_for(lambda: daemon.events("daemon.schema_newer"), "the compatible one logged", daemon)
        first = start_run(store)
        wait_for(lambda: store.read(lambda c: q.get_run(c, first)).status.finished, "run", daemon)

        newer_migration(pg_url, breaking=True)
        wait_for(lambda: daemon.events("daemon.schema_breaking"), "the breaking one", daemon)
        second = start_run(store)
        time_to_claim = 3 * 1.0 + 1  # three renewals of a 3 s lease, and a tick
        deadline = time.monotonic() + time_to_claim
        while time.monotonic() < deadline:  # a claim would show at once: look for a while
            assert store.read(lambda c: q.get_run(c, second)).lease_owner is None
            time.sleep(0.1)
    finally:
        daemon.stop()
        store.close()
    refused = subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(tmp_path / "a"), "serve"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "AGENTD_LOG_FORMAT": "json"},
    )  # fmt: skip
    assert refused.returncode != 0
    assert "breaking" in (refused.stdout + refused.stderr)
