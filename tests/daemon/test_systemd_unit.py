"""systemd, the way operators run it (issue 10, items 9 and 11): the unit verifies and carries
what the README promises (reload, no restart loop on a config error, /etc and /var/lib), and the
daemon's JSON lines reach journald with their priority, warnings included where a person must act.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agentd import log
from tests.daemon.test_daemon import Daemon, act

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "agentd.service"
README = ROOT / "docs" / "systemd.md"


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_the_unit_verifies_with_systemd_analyze(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("SYSTEMD-ANALYZE IS NOT INSTALLED: systemd/agentd.service WAS NOT VERIFIED")
    # The unit names the installed binary; verify against one that exists here.
    text = UNIT.read_text().replace("/opt/agentd/bin/agentd", sys.executable)
    (tmp_path / "agentd.service").write_text(text)
    out = subprocess.run(
        [analyze, "verify", str(tmp_path / "agentd.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [ln for ln in (out.stdout + out.stderr).splitlines() if "agentd.service" in ln]
    assert problems == [], problems


def test_the_unit_reloads_with_sighup_and_never_restart_loops_on_a_config_error() -> None:
    unit = unit_settings()
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert unit["RestartPreventExitStatus"] == ["2"]  # `serve` exits 2 on a config error
    assert unit["Type"] == ["notify"] and unit["WatchdogSec"]
    assert unit["ConfigurationDirectory"] == ["agentd"]  # /etc/agentd
    assert unit["StateDirectory"] == ["agentd"]  # /var/lib/agentd
    assert unit["ExecStart"] == ["/opt/agentd/bin/agentd --home /var/lib/agentd serve"]


def test_the_readme_walks_through_the_systemd_install() -> None:
    text = README.read_text()
    section = text
    for needed in (
        "python3 -m venv /opt/agentd",
        "useradd --system",
        "/etc/agentd/config.toml",
        "/var/lib/agentd",
        "sudo -u agentd /opt/agentd/bin/agentd --home /var/lib/agentd",
        "systemctl reload agentd",
        "ProtectSystem=strict",
        "NoNewPrivileges",
        "polkit.addRule",
        "NOPASSWD",
        "agentd backup",
        "journalctl -u agentd -p warning",
    ):
        assert needed in section, needed


# ── logs operators can alert on ──────────────────────────────────────────────────────────────
@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_json_lines_to_the_journal_carry_their_priority(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon.write([act("ask", question="which region?")])
    log_file = daemon.log(1)
    log_file.touch()
    st = log_file.stat()  # the daemon's stdout is this file: "the journal" for this test
    monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
    daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the question", lambda: '"inbox.question_asked"' in daemon.logs())

    lines = daemon.logs().splitlines()
    by_event: dict[str, tuple[int, dict[str, object]]] = {}
    for line in lines:
        assert line.startswith("<"), line
        prefix, _, body = line[1:].partition(">")
        by_event[json.loads(body)["event"]] = (int(prefix), json.loads(body))
    assert by_event["daemon.ready"][0] == 6  # info
    level, asked = by_event["inbox.question_asked"]
    assert level == 4 and asked["level"] == "warning"  # a person must act
    assert asked["item_id"] == daemon.open_items()[0].item_id and asked["run_id"] == run_id


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_an_approval_request_is_a_warning(daemon: Daemon) -> None:
    daemon.write([act("touch")], actions={"touch": 'type = "command"\nargv = ["true"]'})
    text = daemon.paths.config.read_text()
    daemon.paths.config.write_text(text + 'policy = { rules = { touch = "approve" } }\n')
    daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the approval", lambda: '"inbox.approval_requested"' in daemon.logs())
    (line,) = [ln for ln in daemon.logs().splitlines() if '"inbox.approval_requested"' in ln]
    logged = json.loads(line)
    assert logged["level"] == "warning" and logged["action"] == "touch"
    assert logged["item_id"] == daemon.open_items()[0].item_id and logged["run_id"] == run_id


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_refused_model_call_is_a_warning(daemon: Daemon) -> None:
    daemon.write([])
    (daemon.home / "replies.json").write_text(json.dumps({"judge": [{"verdict": "pass"}]}))
    daemon.serve()
    run_id = daemon.new_run()
    # A refused call is not an outage: the run waits on one question naming the cause (issue 34)
    daemon.until("the run to wait for the operator", lambda: daemon.run(run_id).status == "waiting")
    (line,) = [ln for ln in daemon.logs().splitlines() if '"llm.rejected"' in ln]
    assert json.loads(line)["level"] == "warning"


def test_lines_go_without_a_priority_when_the_stream_is_not_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "1:2")  # inherited from a service, another stream
    with (tmp_path / "out.log").open("w") as out:
        assert not log.to_journal(out)
        st = os.fstat(out.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert log.to_journal(out)


def test_identical_errors_are_held_back_and_counted() -> None:
    now = [0.0]
    throttle = log.Throttle(window_s=60, clock=lambda: now[0])
    kept = []
    for i in range(100):  # ten a second for ten seconds, as a corrupt database would
        now[0] = i / 10
        with contextlib.suppress(structlog.DropEvent):
            kept.append(
                throttle(None, "error", {"event": "failed", "level": "error", "error": "x"})
            )
    assert len(kept) == 1
    other = throttle(None, "error", {"event": "failed", "level": "error", "error": "y"})
    assert "repeated" not in other  # a different error is news
    now[0] = 61
    later = throttle(None, "error", {"event": "failed", "level": "error", "error": "x"})
    assert later["repeated"] == 99
    info = {"event": "step.recorded", "level": "info"}
    assert throttle(None, "info", dict(info)) == info and throttle(None, "info", dict(info)) == info


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_config_error_at_start_exits_2_as_an_error_in_the_journal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[daemon]\nlog_level = "loud"\n')
    journal = tmp_path / "journal.log"
    with journal.open("w") as out:
        st = os.fstat(out.fileno())
        done = subprocess.run(
            [sys.executable, "-m", "agentd", "--home", str(home), "serve"],
            stdout=out,
            stderr=out,
            env={**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"},
            timeout=30,
        )
    assert done.returncode == 2  # RestartPreventExitStatus=2: no restart loop
    lines = journal.read_text().splitlines()
    assert lines[0].startswith("<3>agentd: ") and "config.toml" in lines[0], lines
    assert all(ln.startswith("<3>") for ln in lines), lines  # journald: one entry per line


def test_the_unit_names_no_web_address_it_cannot_vouch_for() -> None:
    # `systemctl help agentd` opens Documentation=; the project has no address of its own, and
    # a guessed one (github.com/agentd/agentd) may be someone else's, as `pip install agentd` was
    settings = unit_settings()
    urls = [u for values in settings.values() for v in values for u in v.split() if "://" in u]
    assert urls == [] and "Documentation" not in settings, urls
