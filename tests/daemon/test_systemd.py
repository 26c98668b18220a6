"""systemd integration: notifications reach a real socket, and the unit file verifies clean."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.daemon import sdnotify

ROOT = Path(__file__).resolve().parents[2]


def test_sdnotify_sends_to_notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert sdnotify.notify("READY=1")
        assert sock.recv(100) == b"READY=1"


def test_sdnotify_without_systemd_is_a_quiet_no(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sdnotify.notify("READY=1") is False


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_unit_verifies_clean(tmp_path: Path) -> None:
    unit = (ROOT / "systemd/agentd.service").read_text()
    # The unit points at the installed binary; verify against one that exists here.
    unit = unit.replace("/opt/agentd/bin/agentd", sys.executable)
    (tmp_path / "agentd.service").write_text(unit)
    out = subprocess.run(
        [str(shutil.which("systemd-analyze")), "verify", str(tmp_path / "agentd.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [ln for ln in (out.stdout + out.stderr).splitlines() if "agentd.service" in ln]
    assert problems == []
