"""The shipped Prometheus rules: `promtool check rules` passes, and `promtool test rules` shows the
approval-waiting alert firing (after four hours and five minutes, not before) and the fence alert."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.telemetry.conftest import RULES, require_prometheus


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    require_prometheus()
    return subprocess.run(
        [shutil.which("promtool") or "promtool", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_shipped_rules_pass_promtool_check() -> None:
    done = promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_approval_waiting_too_long_fires_in_promtool_test() -> None:
    done = promtool("test", "rules", "agentd-rules.test.yml", cwd=RULES.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_test_would_fail_on_a_rule_that_never_fires(tmp_path: Path) -> None:
    """The unit test is not vacuous: with the threshold raised past the scenario, it fails."""
    rules = RULES.read_text().replace("> 4 * 3600", "> 40 * 3600")
    (tmp_path / RULES.name).write_text(rules)
    (tmp_path / "agentd-rules.test.yml").write_text(
        (RULES.parent / "agentd-rules.test.yml").read_text()
    )
    done = promtool("test", "rules", "agentd-rules.test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "AgentdApprovalWaitingTooLong" in done.stdout + done.stderr
