"""SIGHUP reloads the config (issue 10, item 10), on a real `agentd serve` process.

A tightened policy reaches a run that was already waiting when the signal came; a config that does
not validate is logged and the one in force is kept (the daemon lives on); the sha256 of the
loaded file's bytes is recorded in the meta table at start and at every reload, for `doctor`.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.db import meta
from agentd.db import queries as q
from agentd.models import RunStatus, StepKind, Verdict
from tests.daemon.test_daemon import FINISH, Daemon, act, cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

CONFIG = """\
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.append]
type = "command"
argv = ["sh", "-c", "echo done >> {out}"]

[agents.default]
actions = ["append", "ask", "finish"]
policy = {{ rules = {{ append = "{rule}" }} }}
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "home")
    try:
        yield d
    finally:
        d.kill_all()


def configure(daemon: Daemon, rule: str) -> Path:
    out = daemon.home / "effects.txt"
    daemon.paths.config.write_text(CONFIG.format(out=out, rule=rule))
    return out


def hup(daemon: Daemon, proc: subprocess.Popen[bytes], expect: str) -> None:
    """SIGHUP, then wait for the line that says how it went (`config.reloaded` or `_failed`)."""
    before = daemon.logs().count(expect)
    proc.send_signal(signal.SIGHUP)
    daemon.until(expect, lambda: daemon.logs().count(expect) > before)
    assert proc.poll() is None, daemon.logs()[-2000:]


def loaded_sha(daemon: Daemon) -> str:
    return daemon.store.read(meta.loaded_config)


def test_reload_applies_a_tightened_policy_to_a_run_already_waiting(daemon: Daemon) -> None:
    daemon.write([act("ask", question="go ahead?"), act("append"), FINISH])
    out = configure(daemon, "allow")
    proc = daemon.serve()
    run_id = daemon.new_run()
    daemon.until("the run to wait", lambda: daemon.run(run_id).status == RunStatus.WAITING)

    configure(daemon, "deny")
    hup(daemon, proc, '"config.reloaded"')
    (item,) = daemon.open_items()
    answered = cli(daemon.home, "inbox", "answer", str(item.item_id), "yes, go ahead")
    assert answered.returncode == 0, answered.stderr

    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert not out.exists(), "an action denied by the reloaded policy ran"
    steps = daemon.store.read(lambda c: q.list_steps(c, run_id))
    denied = [s for s in steps if s.kind == StepKind.CHECK and s.verdict == Verdict.DENY]
    assert denied, [(s.kind, s.verdict) for s in steps]
    assert not [s for s in steps if s.kind == StepKind.ACT and s.data.get("action") == "append"]
    assert daemon.terminate(proc)[0] == 0


def test_reload_with_a_bad_config_is_logged_and_the_old_one_kept(daemon: Daemon) -> None:
    daemon.write([act("append"), FINISH])
    out = configure(daemon, "allow")
    proc = daemon.serve()
    good = loaded_sha(daemon)

    daemon.paths.config.write_text(CONFIG.format(out=out, rule="sometimes"))
    hup(daemon, proc, '"config.reload_failed"')
    failed = [ln for ln in daemon.logs().splitlines() if '"config.reload_failed"' in ln]
    assert str(daemon.paths.config) in failed[-1] and '"level": "error"' in failed[-1], failed
    assert loaded_sha(daemon) == good

    run_id = daemon.new_run()  # still served, under the config it loaded first
    daemon.until("the run to finish", lambda: daemon.run(run_id).status.finished)
    assert daemon.run(run_id).status == RunStatus.SUCCEEDED
    assert out.read_text() == "done\n"
    assert daemon.terminate(proc)[0] == 0


def test_the_loaded_config_sha256_is_recorded_at_start_and_at_reload(daemon: Daemon) -> None:
    daemon.write([FINISH])
    configure(daemon, "allow")
    proc = daemon.serve()
    assert loaded_sha(daemon) == hashlib.sha256(daemon.paths.config.read_bytes()).hexdigest()

    configure(daemon, "approve")
    hup(daemon, proc, '"config.reloaded"')
    assert loaded_sha(daemon) == hashlib.sha256(daemon.paths.config.read_bytes()).hexdigest()
    assert daemon.terminate(proc)[0] == 0


def test_agentd_reload_checks_the_config_first_and_never_signals_a_stale_pid(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from agentd.cli import app

    home = tmp_path / "home"
    assert CliRunner().invoke(app, ["--home", str(home), "init"]).exit_code == 0
    (home / "agentd.lock").write_text("1\n")  # a pid left behind: no daemon holds the lock
    no_daemon = CliRunner().invoke(app, ["--home", str(home), "reload"])
    assert no_daemon.exit_code == 1 and "no daemon serves" in no_daemon.output
    (home / "config.toml").write_text("[agents.x]\nactions = 3\n")
    bad = CliRunner().invoke(app, ["--home", str(home), "reload"])
    assert bad.exit_code == 2 and "line 2" in bad.output


def test_a_reload_that_drops_an_agent_with_active_goals_is_refused(daemon: Daemon) -> None:
    daemon.write([act("append"), FINISH])
    out = configure(daemon, "approve")  # the run waits for an approval, its goal active
    proc = daemon.serve()
    good = loaded_sha(daemon)
    run_id = daemon.new_run()
    daemon.until("the run to wait", lambda: daemon.run(run_id).status == RunStatus.WAITING)

    daemon.paths.config.write_text(
        CONFIG.format(out=out, rule="approve").replace("[agents.default]", "[agents.renamed]")
    )
    hup(daemon, proc, '"config.reload_failed"')
    failed = [ln for ln in daemon.logs().splitlines() if '"config.reload_failed"' in ln][-1]
    assert "default" in failed and "active goals" in failed
    assert loaded_sha(daemon) == good
    assert daemon.run(run_id).status == RunStatus.WAITING  # still served, untouched
    assert daemon.terminate(proc)[0] == 0
