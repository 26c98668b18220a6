"""`agentd demo --build` (issue 9): after the service-watch run, the incident report is built from
that run's journal with the embedded template writer and judge — no API key — judged against a
timeline, the root cause and the approved action with who approved it, revised once, and shown
with its verdicts. Real processes, the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.demo.test_service_watch import AGENTD, cli


@pytest.mark.timeout(90)
def test_demo_build_revises_the_incident_report_once_and_shows_its_verdicts(
    tmp_path: Path,
) -> None:
    home = tmp_path / "demo"
    done = subprocess.run(
        [*AGENTD, "demo", "--yes", "--build", "--home", str(home)],
        capture_output=True, text=True, timeout=80, env={"COLUMNS": "140", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "judge     v1: fails R2, R3, C1" in out and "judge     v2: passed" in out
    assert "v2 of 2 — passed" in out and "JUDGE'S FINDINGS" in out

    [artifact] = json.loads(cli(home, "artifact", "list", "--json"))
    assert artifact["versions"] == 2 and artifact["status"] == "passed"
    shown = json.loads(cli(home, "artifact", "show", str(artifact["artifact"]), "--json"))
    text = shown["text"]
    # Built from the journal: the approval and who gave it, the bad deploy, the rollback.
    assert "## Timeline" in text and "## The root cause" in text
    assert "v2-bad" in text and "rollback approved" in text
    assert "approved by agentd demo --yes" in text
    sources = {r["source"] for r in shown["requirements"]}
    assert sources == {"operator", "goal", "check"}
    first = json.loads(cli(home, "artifact", "show", str(artifact["artifact"]), "-v", "1",
                           "--json"))  # fmt: skip
    assert first["verdict"]["failing"] == ["R2", "R3", "C1"]
