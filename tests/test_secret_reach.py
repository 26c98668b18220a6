"""API keys stay out of reach of the commands the daemon runs: the daemon makes itself
non-dumpable (as ssh-agent does), and a systemd credential can replace the variable altogether."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentd import config

CHILD = """
import ctypes, ctypes.util
from agentd.outside import process
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
before = libc.prctl(3)  # PR_GET_DUMPABLE
took = process.guard_memory()
print(before, took, libc.prctl(3))
"""


def test_daemon_makes_itself_non_dumpable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["1", "True", "0"]


def test_secret_prefers_a_systemd_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ANTHROPIC_API_KEY").write_text("from-credential\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    assert config.secret("ANTHROPIC_API_KEY") == "from-credential"
    assert config.secret("OTHER_KEY") is None
    monkeypatch.setenv("OTHER_KEY", "env-only")
    assert config.secret("OTHER_KEY") == "env-only"
