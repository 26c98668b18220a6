"""A side effect finished by a process the command started must not happen twice when the daemon
is SIGKILLed mid-action and restarted, outside systemd (issue 7, item 5): only the daemon dies,
its command dies with it (PDEATHSIG), the grandchild doing the work survives — and recovery must
fence it before verifying and re-running."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import RunStatus, StepKind, StepStatus
from tests.runs.test_crash import start_daemon, wait_ready

# The grandchild does its work only once the test lets it (a file appears): after the restarted
# daemon has fenced — however long a restart takes on a loaded machine. A grandchild that
# survived the fence would then write a second line.


def write_home(home: Path) -> Path:
    home.mkdir()
    effects = home / "effects.txt"
    effects.touch()
    # The script's work is done by a process it starts, as a curl or kubectl would be.
    release = home / "release"
    (home / "charge.sh").write_text(
        f"sh -c 'while [ ! -e {release} ]; do sleep 0.05; done; "
        f'echo "$AGENTD_IDEMPOTENCY_KEY" >> {effects}\'\n'
    )
    verify = f'grep -qx "$AGENTD_IDEMPOTENCY_KEY" {effects} && echo done || echo not-done'
    replies = [
        {"action": {"kind": "charge"}},
        {"action": {"kind": "finish", "outcome": "succeeded", "summary": "charged"}},
    ]
    (home / "replies.json").write_text(json.dumps(replies))
    (home / "config.toml").write_text(
        textwrap.dedent(
            f"""
            [daemon]
            poll_interval_s = 0.05

            [models.default]
            provider = "scripted"
            replies = "replies.json"

            [actions.charge]
            type = "command"
            argv = ["sh", "{home / "charge.sh"}"]
            verify_argv = ["sh", "-c", '{verify}']

            [agents.default]
            actions = ["charge", "finish"]
            """
        )
    )
    return effects


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_crash_mid_action_kills_the_commands_descendants_before_rerunning(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    effects = write_home(home)
    store = SyncStore(home / "agentd.db")
    goal_id = store.write(
        lambda c: q.add_goal(c, title="charge once", why="t", agent="default", criteria=[],
                             deadline=None)
    )  # fmt: skip
    run_id = store.write(
        lambda c: q.create_run(c, goal_id=goal_id, agent="default", trigger="test")
    )

    def started() -> bool:
        steps = store.read(lambda c: q.list_steps(c, run_id))
        return any(s.kind == StepKind.ACT for s in steps)  # its intent is journaled

    daemon = start_daemon(home)
    try:
        wait_ready(home, 1)
        deadline = time.monotonic() + 20
        while not started():
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.02)
        time.sleep(0.5)  # the command has started its grandchild, which waits for the release
        os.kill(daemon.pid, signal.SIGKILL)  # the daemon only: no cgroup kills the rest
        daemon.wait(5)
        daemon = start_daemon(home)
        wait_ready(home, 2)
        deadline = time.monotonic() + 30
        while "action.fenced" not in (home / "daemon.log").read_text():
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.05)
        (home / "release").touch()  # a surviving grandchild would write now, beside the rerun
        while not store.read(lambda c: q.get_run(c, run_id)).status.finished:
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.05)
        time.sleep(0.5)  # a survivor's loop notices the release within 0.05 s
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
    assert store.read(lambda c: q.get_run(c, run_id)).status == RunStatus.SUCCEEDED
    lines = effects.read_text().splitlines()
    assert len(lines) == 1, f"the charge happened {len(lines)} times: {lines}"
    act = next(s for s in store.read(lambda c: q.list_steps(c, run_id)) if s.kind == StepKind.ACT)
    assert act.status == StepStatus.DONE
    assert act.result is not None and act.result["recovered"] == "verified not done; ran"
    assert "action.fenced" in (home / "daemon.log").read_text()
    store.close()
