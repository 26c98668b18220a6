"""A home served by a real `agentd serve --clock-speed … --clock-start …` process, and the CLI run
on it as a user runs it (a fresh Python each command, TZ=UTC): what the one-clock tests share."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from agentd.db.store import SyncStore
from tests import processes

AGENTD = processes.AGENTD
ENV = {**os.environ, "TZ": "UTC", "AGENTD_LOG_FORMAT": "json", "COLUMNS": "160"}

CONFIG = """\
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]

[agents.default.checkin]
enabled = false
"""


def reply(action: dict[str, Any]) -> dict[str, Any]:
    return {"reason": "the test says so", "action": action}


def ts(value: str) -> float:
    """An ISO 8601 time from --json as unix seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def until(what: str, check: Callable[[], Any], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


class ClockHome:
    """A home on disk, the daemons started on it (daemon-N.log each) and the CLI."""

    def __init__(self, root: Path, replies: list[dict[str, Any]]) -> None:
        self.root = root
        root.mkdir(parents=True)
        (root / "config.toml").write_text(CONFIG)
        (root / "replies.json").write_text(json.dumps(replies))
        SyncStore(root / "agentd.db").close()  # created and migrated, as `agentd init` leaves it
        self.procs: list[subprocess.Popen[bytes]] = []

    def cli(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*AGENTD, "--home", str(self.root), *args],
            capture_output=True, text=True, timeout=60, env=ENV,
        )  # fmt: skip
        assert done.returncode == code, done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def log(self, n: int) -> Path:
        return self.root / f"daemon-{n}.log"

    def serve(self, *extra: str) -> subprocess.Popen[bytes]:
        log = self.log(len(self.procs) + 1)
        proc = processes.start(self.root, log, *extra, env=ENV)
        self.procs.append(proc)
        processes.wait_ready(proc, log)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        assert processes.terminate(proc) == 0

    def kill_all(self) -> None:
        for proc in self.procs:
            processes.kill(proc)
