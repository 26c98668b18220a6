"""The service-watch scenario with its state in PostgreSQL and two daemons sharing it (issue 21,
done-when): the demo home's daemon is SIGKILLed while the rollback's approval waits; the operator
approves through that home's CLI (no daemon left there to poke: NOTIFY tells the other); the
second daemon, on a home of its own, wakes the run, rolls back once and finishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentd.models import RunStatus
from tests.demo.test_service_watch import (
    Scenario,
    assert_one_rollback_after_approval,
    cli,
    item_json,
    run_json,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def store_table(url: str) -> str:
    return textwrap.dedent(
        f"""
        [store]
        url = "{url}"
        lease_s = 3.0
        """
    )


def test_demo_on_postgresql_finishes_on_the_other_daemon_after_a_kill(
    tmp_path: Path, pg_url: str
) -> None:
    s = Scenario(tmp_path / "demo", store=store_table(pg_url))
    other_home = tmp_path / "other"
    other: subprocess.Popen[bytes] | None = None
    try:
        s.start()
        item = s.wait_approval()
        # A second daemon on a home of its own, the same config: the same agents, one database.
        other_home.mkdir()
        (other_home / "config.toml").write_text(s.demo.paths.config.read_text())
        with (other_home / "daemon.log").open("ab") as log:
            other = subprocess.Popen(
                [sys.executable, "-m", "agentd", "--home", str(other_home), "serve"],
                stdout=log, stderr=log, start_new_session=True,
                env={**os.environ, "AGENTD_LOG_FORMAT": "json"},
            )  # fmt: skip
        s.until(
            lambda: '"daemon.ready"' in (other_home / "daemon.log").read_text(), "the other daemon"
        )
        s.kill_daemon()
        assert s.open_approval() == item  # the approval survived the kill untouched

        cli(s.home, "inbox", "approve", str(item.item_id))
        run = s.wait_finished()

        assert run.status == RunStatus.SUCCEEDED, run.summary
        assert run.lease_owner is None
        shown = run_json(s.home, run.run_id)
        assert_one_rollback_after_approval(s.home, shown, item_json(s.home, item.item_id))
        woke = [line for line in (other_home / "daemon.log").read_text().splitlines()
                if '"run.woken"' in line]  # fmt: skip
        assert woke, "the other daemon woke the run"
    finally:
        if other is not None and other.poll() is None:
            os.killpg(other.pid, signal.SIGTERM)
            other.wait(timeout=30)
        s.close()
