"""A home whose daemon serves /metrics on a port of its own, for the metrics tests: the config,
`agentd serve` as a real process, the CLI, and waiting on conditions (never on sleeps)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.telemetry.prom_server import free_port

AGENTD = [sys.executable, "-m", "agentd"]
TITLE = "Ship the Zanzibar secret launch"  # a title that must never become a label


def act(kind: str, **args: Any) -> dict[str, Any]:
    return {"reason": f"do {kind}", "action": {"kind": kind, **args}}


FINISH = act("finish", outcome="succeeded", summary="ok")
NOTHING = {"reason": "all quiet", "next_look_in_s": None, "verdict": {"kind": "nothing"}}


class MetricsHome:
    def __init__(self, root: Path, metrics: str = "enabled = true", tables: str = "") -> None:
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        out = root / "appended.txt"
        (root / "replies.json").write_text(json.dumps([act("append", word="hello"), FINISH]))
        (root / "checkins.json").write_text(json.dumps([NOTHING] * 50))
        argv = json.dumps(["sh", "-c", f"echo {{word}} >> {out}"])
        (root / "config.toml").write_text(
            "[daemon]\npoll_interval_s = 0.05\n\n"
            f"[api]\nport = {self.port}\n\n[metrics]\n{metrics}\n\n"
            '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
            '[models.checker]\nprovider = "scripted"\nreplies = "checkins.json"\n\n'
            f'[actions.append]\ntype = "command"\nargv = {argv}\n'
            'params = { word = { pattern = "^[a-z]+$" } }\n\n'
            f"{tables}"
            '[agents.default]\nactions = ["append", "finish"]\n'
            'policy = { rules = { append = "approve" } }\n\n'
            # quiet = "none": check-ins run at any hour (the default holds them 22:00-08:00 UTC)
            '[agents.default.checkin]\nmodel = "checker"\nquiet = "none"\n'
        )

    def serve(self, env: dict[str, str] | None = None) -> None:
        log = (self.root / "daemon.log").open("ab")
        self.proc = subprocess.Popen(
            [*AGENTD, "--home", str(self.root), "serve"], stdout=log, stderr=log,
            env={**os.environ, "AGENTD_LOG_FORMAT": "json", **(env or {})},
            start_new_session=True,
        )  # fmt: skip
        log.close()
        self.until("the daemon to be ready", lambda: '"daemon.ready"' in self.log())

    def log(self) -> str:
        path = self.root / "daemon.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cli(self, *args: str) -> str:
        done = subprocess.run([*AGENTD, "--home", str(self.root), *args], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def get(self, path: str = "/metrics", **headers: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", headers=headers, timeout=30)

    def until(self, what: str, check: Callable[[], Any], timeout_s: float = 60) -> Any:
        deadline = time.monotonic() + timeout_s
        while not (value := check()):
            if time.monotonic() > deadline or (
                self.proc is not None and self.proc.poll() is not None
            ):
                raise AssertionError(f"timed out waiting for {what}:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        return value

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
