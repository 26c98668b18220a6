"""`agentd serve --detach` returns success only once the daemon serves (its `daemon.ready` line),
not once it holds the home's lock: a daemon that takes the lock and then gives up (a corrupt
database) is said as a failed start, with the log's last lines. Real processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.daemon.test_daemon import AGENTD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_serve_detach_on_a_corrupt_database_says_the_start_failed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = [*AGENTD, "--home", str(home)]
    subprocess.run([*run, "init"], check=True, capture_output=True, timeout=90)
    (home / "agentd.db").write_bytes(os.urandom(4096))
    # Three starts: whether the old wait saw the lock before the daemon gave up was a race.
    for _ in range(3):
        done = subprocess.run(
            [*run, "serve", "--detach"], capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "serves" not in done.stdout
        assert "the daemon exited 1 at start" in done.stderr and "corrupt" in done.stderr


def test_detach_repeats_what_went_wrong_before_ready() -> None:
    from agentd.cli.serving import _troubles

    said = (
        '{"event": "api.port_failed", "level": "error", "port": 8765, "timestamp": "t"}\n'
        '{"event": "daemon.ready", "level": "info", "timestamp": "t"}\n'
        "2026-12-07 04:00 [info] daemon.ready\n"
    )
    assert _troubles(said) == ["api.port_failed: port=8765"]
