"""A throw-away Prometheus server for the metrics tests (Debian's `prometheus`; no pytest here).

Listens on a free loopback port with its storage in a temp dir, scrapes every 0.5 s the targets a
test writes into `targets/<name>.json` (file service discovery: no reload), and evaluates the rule
files it is started with. `query()` asks its HTTP API for an instant vector. Stopped (SIGTERM, then
SIGKILL) and its dir removed by `stop()`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests import servers

INSTALL_HINT = "install it with `bash .ci/install-prometheus` (apt-get install prometheus)"


def missing_reason() -> str | None:
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            return f"PROMETHEUS TEST SKIPPED: `{tool}` is not on PATH; {INSTALL_HINT}"
    return None


free_port = servers.free_port  # the old name


class Prometheus:
    def __init__(self, root: Path, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.root = root
        self.port = port
        self.proc = proc
        self.url = f"http://127.0.0.1:{port}"

    @classmethod
    def start(cls, rule_files: list[Path] | None = None) -> Prometheus:
        root = servers.make_dir("agentd-prom-")
        (root / "targets").mkdir()
        config = {
            "global": {"scrape_interval": "500ms", "evaluation_interval": "500ms",
                       "scrape_timeout": "400ms"},
            "rule_files": [str(p) for p in rule_files or []],
            "scrape_configs": [{
                "job_name": "agentd",
                "file_sd_configs": [{"files": [str(root / "targets" / "*.json")],
                                     "refresh_interval": "1s"}],
            }],
        }  # fmt: skip
        (root / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        port = free_port()
        log = (root / "prometheus.log").open("wb")
        proc = subprocess.Popen(
            [shutil.which("prometheus") or "prometheus", f"--config.file={root / 'prometheus.yml'}",
             f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--web.enable-lifecycle", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        server = cls(root, port, proc)
        server.wait_ready()
        return server

    def wait_ready(self, timeout_s: float = 60) -> None:
        servers.wait_until(
            lambda: servers.http_ok(f"{self.url}/-/ready"), "prometheus", process=self.proc,
            log=self.log, within_s=timeout_s,
        )  # fmt: skip

    def log(self) -> str:
        return (self.root / "prometheus.log").read_text(errors="replace")

    def scrape(
        self, name: str, port: int, *, token: str | None = None, path: str = "/metrics"
    ) -> None:
        """Scrape 127.0.0.1:`port` from now on (job `agentd`, instance label as usual)."""
        labels = {"__metrics_path__": path, "target": name}
        entry: dict[str, Any] = {"targets": [f"127.0.0.1:{port}"], "labels": labels}
        # file_sd cannot carry a token: a token-protected target gets its own scrape job.
        assert token is None, "token scrapes: use a job of their own"
        tmp = self.root / "targets" / f".{name}.tmp"
        tmp.write_text(json.dumps([entry]))
        tmp.replace(self.root / "targets" / f"{name}.json")

    def query(self, promql: str) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def targets(self) -> list[dict[str, Any]]:
        r = httpx.get(f"{self.url}/api/v1/targets", timeout=10)
        return list(r.json()["data"]["activeTargets"])

    def stop(self) -> None:
        servers.stop_process(self.proc)
        shutil.rmtree(self.root, ignore_errors=True)
