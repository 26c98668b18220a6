"""A real Alertmanager (Debian's `prometheus-alertmanager`) for the inbound-hook tests: started per
test on loopback in a temp dir (clustering off, its own storage), its one webhook receiver pointing
at agentd's `/hooks/NAME` with a bearer token, grouping and repeats fast enough for a test. Alerts
are posted to its API (`/api/v2/alerts`) as Prometheus posts them.

Where the binary is missing the tests skip with a reason that says how to install it (a banner
repeats it at the end of the run: tests/servers.py); with AGENTD_REQUIRE_ALERTMANAGER=1 (`.ci/run`) they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests import servers

BANNER_MARK = "ALERTMANAGER TEST SKIPPED"
CONFIG = """
route:
  receiver: agentd
  group_by: ['...']
  group_wait: 100ms
  group_interval: 500ms
  repeat_interval: 1s
receivers:
  - name: agentd
    webhook_configs:
      - url: "{url}"
        send_resolved: true
        http_config:
          authorization:
            credentials: "{token}"
"""


def binary() -> str | None:
    return shutil.which("prometheus-alertmanager") or (
        "/usr/bin/prometheus-alertmanager"
        if os.access("/usr/bin/prometheus-alertmanager", os.X_OK)
        else None
    )


def missing_reason() -> str | None:
    """Why the Alertmanager tests cannot run here, or None."""
    if binary() is not None:
        return None
    return (
        f"{BANNER_MARK}: Debian's prometheus-alertmanager is not installed; install it with "
        "`bash .ci/install-alertmanager` (apt-get install prometheus-alertmanager)"
    )


def _skip_or_fail_if_missing() -> str:
    servers.require(missing_reason(), "ALERTMANAGER")
    found = binary()
    assert found is not None
    return found


class Alertmanager:
    def __init__(self, base: str) -> None:
        self.base = base

    def fire(self, labels: dict[str, str], annotations: dict[str, str], starts: datetime) -> None:
        self._post(labels, annotations, starts, None)

    def resolve(
        self, labels: dict[str, str], annotations: dict[str, str], starts: datetime
    ) -> None:
        self._post(labels, annotations, starts, datetime.now(UTC))

    def _post(self, labels: dict[str, str], annotations: dict[str, str], starts: datetime,
              ends: datetime | None) -> None:  # fmt: skip
        alert: dict[str, Any] = {
            "labels": labels, "annotations": annotations, "startsAt": starts.isoformat(),
            "generatorURL": "http://prometheus.example/graph?g0.expr=up",
        }  # fmt: skip
        if ends is not None:
            alert["endsAt"] = ends.isoformat()
        reply = httpx.post(f"{self.base}/api/v2/alerts", json=[alert], timeout=10)
        assert reply.status_code == 200, reply.text


@contextlib.contextmanager
def running(tmp: Path, hook_url: str, token: str) -> Iterator[Alertmanager]:
    """An Alertmanager whose receiver posts to `hook_url` with `token`; stopped after."""
    exe = _skip_or_fail_if_missing()
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "alertmanager.yml").write_text(CONFIG.format(url=hook_url, token=token))
    port = servers.free_port()
    with (tmp / "alertmanager.log").open("w") as log:
        child = subprocess.Popen(
            [exe, f"--config.file={tmp / 'alertmanager.yml'}", f"--storage.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        servers.wait_until(
            lambda: servers.http_ok(f"{base}/-/ready"), "Alertmanager", process=child,
            log=lambda: (tmp / "alertmanager.log").read_text(), within_s=30,
        )  # fmt: skip
        yield Alertmanager(base)
    finally:
        servers.stop_process(child, within_s=10)
