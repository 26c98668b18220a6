"""A test run killed before its teardown leaves its Dovecot running; the next start of one stops it
and removes its dir (owner.pid, as tests/pg_cluster.py does), and leaves a live run's alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.dovecot import _skip_or_fail_if_missing
from tests.dovecot_server import _alive, sweep_orphans

pytestmark = [pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
START = (
    "import time\nfrom tests.dovecot_server import Dovecot\ns = Dovecot.start()\n"
    "print(s.dir, flush=True)\ntime.sleep(600)\n"
)


def test_a_killed_runs_dovecot_is_stopped_and_removed() -> None:
    _skip_or_fail_if_missing()
    owner = subprocess.Popen([sys.executable, "-c", START], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        left = Path(owner.stdout.readline().decode().strip())
        master = int((left / "dovecot.pid").read_text())
        assert _alive(master)
        sweep_orphans(Path(tempfile.gettempdir()))  # its owner lives: left alone
        assert left.exists() and _alive(master)
        owner.send_signal(signal.SIGKILL)  # a pytest killed mid-run: no teardown
        owner.wait()
        assert _alive(master), "dovecot should outlive its killed owner (the leak this sweeps)"
        sweep_orphans(Path(tempfile.gettempdir()))
        assert not _alive(master)
        assert not left.exists()
    finally:
        if owner.poll() is None:
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
