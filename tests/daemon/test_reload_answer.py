"""`agentd reload` waits for the daemon's verdict and prints it as `systemctl reload` would
(issue 19, item 5), on a real `agentd serve` process: applied (exit 0) with warnings for settings
that wait for a restart and for checks doctor would FAIL; refused (exit 1) with the daemon's
reason, the config it ran kept.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.models import RunStatus
from tests.conftest import closed_port
from tests.daemon.test_daemon import FINISH, Daemon, act, cli
from tests.daemon.test_reload import CONFIG, configure, loaded_sha

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def test_reload_says_applied_and_warns_of_a_restart_and_of_doctor_failures(
    daemon: Daemon,
) -> None:
    daemon.write([FINISH])
    out = configure(daemon, "allow")
    proc = daemon.serve()
    before = loaded_sha(daemon)
    text = CONFIG.format(out=out, rule="approve") + (
        f'\n[api]\nport = {closed_port()}\n\n[actions.page]\ntype = "command"\n'
        'argv = ["/nonexistent/agentd-pager"]\n'
    )
    daemon.paths.config.write_text(
        text.replace('actions = ["append"', 'actions = ["page", "append"')
    )

    reloaded = cli(daemon.home, "reload")

    assert reloaded.returncode == 0, reloaded.stderr
    assert f"reloaded: the daemon (pid {proc.pid})" in reloaded.stdout
    assert loaded_sha(daemon) != before  # applied before the command returned, not later
    warnings = [ln for ln in reloaded.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("next start: [api] port" in ln for ln in warnings), reloaded.stderr
    failing = [ln for ln in warnings if "doctor would FAIL program page" in ln]
    assert failing and "/nonexistent/agentd-pager does not exist" in failing[0], reloaded.stderr
    assert daemon.terminate(proc)[0] == 0


def test_reload_refused_by_the_daemon_says_why_and_exits_1(daemon: Daemon) -> None:
    daemon.write([act("append"), FINISH])
    out = configure(daemon, "approve")  # the run waits for an approval: its goal stays active
    proc = daemon.serve()
    good = loaded_sha(daemon)
    run_id = daemon.new_run()
    daemon.until("the run to wait", lambda: daemon.run(run_id).status == RunStatus.WAITING)
    daemon.paths.config.write_text(
        CONFIG.format(out=out, rule="approve").replace("[agents.default]", "[agents.renamed]")
    )

    refused = cli(daemon.home, "reload")
    as_json = cli(daemon.home, "reload", "--json")

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "reloaded" not in refused.stdout
    assert "reload refused: agents default are gone from the config" in refused.stderr
    assert "the config loaded before is kept" in refused.stderr
    verdict = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and verdict["applied"] is False and verdict["pid"] == proc.pid
    assert loaded_sha(daemon) == good
    assert daemon.terminate(proc)[0] == 0


def test_reload_is_not_served_on_the_tcp_port(daemon: Daemon) -> None:
    daemon.write([FINISH])
    out = configure(daemon, "allow")
    port = closed_port()
    daemon.paths.config.write_text(
        CONFIG.format(out=out, rule="allow") + f"\n[api]\nport = {port}\n"
    )
    proc = daemon.serve()
    before = daemon.logs().count('"config.reloaded"')
    token = daemon.paths.api_token.read_text().strip()

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/api/daemon/reload", headers={"Authorization": f"Bearer {token}"})
        answer = conn.getresponse()
        body = answer.read()
    finally:
        conn.close()

    assert answer.status == 403 and b"unix socket" in body
    assert daemon.logs().count('"config.reloaded"') == before
    assert daemon.terminate(proc)[0] == 0


def test_reload_warns_of_a_file_tail_source_whose_file_does_not_exist(
    daemon: Daemon, tmp_path: Path
) -> None:
    # doctor FAILs it (its look finds no file); reload reads the tail too: a local read, no probe
    daemon.write([FINISH])
    out = configure(daemon, "allow")
    proc = daemon.serve()
    missing = tmp_path / "gone" / "checkout.log"  # absolute, as the config resolves every path
    readable = tmp_path / "present.log"
    readable.write_text("started\n")
    text = CONFIG.format(out=out, rule="allow").replace(
        "[agents.default]\n", '[agents.default]\nsources = ["app_log", "other_log"]\n'
    ) + (
        f'\n[sources.app_log]\ntype = "file_tail"\npath = "{missing}"\n'
        f'\n[sources.other_log]\ntype = "file_tail"\npath = "{readable}"\n'
    )
    daemon.paths.config.write_text(text)

    reloaded = cli(daemon.home, "reload")
    as_json = cli(daemon.home, "reload", "--json")

    assert reloaded.returncode == 0, reloaded.stderr
    warnings = [ln for ln in reloaded.stderr.splitlines() if ln.startswith("warning: ")]
    assert [ln for ln in warnings if "source" in ln] == [
        f"warning: doctor would FAIL source app_log: check failed, the look cannot be made: "
        f"no such file: {missing}"
    ], reloaded.stderr
    assert any("source app_log" in w for w in json.loads(as_json.stdout)["warnings"])
    doctor = cli(daemon.home, "doctor").stdout.splitlines()  # the same finding, in its words
    assert any(ln.startswith("FAIL") and f"no such file: {missing}" in ln for ln in doctor)
    assert daemon.terminate(proc)[0] == 0
