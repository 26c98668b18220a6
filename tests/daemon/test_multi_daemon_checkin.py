"""A check-in goal on two real daemons sharing one PostgreSQL database (issue 21, done-when): the
goal's first check-in asks its model, which starts a run; the daemon driving that run is SIGKILLed
while the run's non-idempotent command is in flight; the other daemon takes the run over (fenced,
verified not done, run once) and finishes it. One check-in model call, one run, one effect."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentd.config import Paths
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import RunStatus
from tests.daemon import test_multi_daemon as multi
from tests.daemon.test_multi_daemon import Daemon, in_flight, settled, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]


def write_home(home: Path, url: str, shared: Path) -> None:
    """The takeover tests' home (one held append, then finish) with a check-in that starts it."""
    multi.write_home(home, url, shared)
    checkin = [{"reason": "time to act", "next_look_in_s": None,
                "verdict": {"kind": "start_run", "request": "Append once."}}]  # fmt: skip
    (home / "checkins.json").write_text(json.dumps(checkin))
    with (home / "config.toml").open("a") as config:
        config.write(
            textwrap.dedent(
                f"""
                [models.checker]
                provider = "scripted"
                replies = "checkins.json"
                request_log = "{shared / "checkins.log"}"

                [agents.default.checkin]
                model = "checker"
                every_s = 2
                min_s = 1
                jitter_s = 0
                quiet = "none"
                first_look = "ask"
                """
            )
        )


def test_a_checkin_goals_run_finishes_on_the_other_daemon_after_a_kill(
    tmp_path: Path, pg_url: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        write_home(home, pg_url, shared)
    store = SyncStore(Paths(homes[0]).db)
    daemons = [Daemon(h) for h in homes]
    try:
        for d in daemons:
            d.start()
        store.write(
            lambda c: q.add_goal(c, title="Append once", why="check-in", agent="default",
                                 criteria=["appended"], deadline=None)
        )  # fmt: skip

        def the_run() -> Any:
            runs = store.read(lambda c: q.list_runs(c))
            return runs[0] if runs else None

        run = wait_for(the_run, "the check-in's run", *daemons)
        wait_for(lambda: in_flight(store, run.run_id), "its command in flight", *daemons)
        # The taker's run of the command need not wait (the holder's is past its check): were
        # `fast` touched only after the takeover, the taker could spawn it first and sleep its
        # 60 s, past the test's wait (as in test_multi_daemon's takeover tests).
        wait_for(lambda: (shared / "holding").exists(), "its command held", *daemons)
        (shared / "fast").touch()
        holder = next(d for d in daemons if d.owns(store.read(lambda c: q.get_run(c, run.run_id))))
        other = daemons[1 - daemons.index(holder)]
        os.killpg(holder.pid, signal.SIGKILL)
        assert holder.proc is not None
        holder.proc.wait()
        wait_for(
            lambda: other.owns(store.read(lambda c: q.get_run(c, run.run_id))), "takeover", other
        )
        wait_for(
            lambda: store.read(lambda c: q.get_run(c, run.run_id)).status == RunStatus.SUCCEEDED,
            "the run finishes",
            other,
        )
    finally:
        (shared / "fast").touch()
        for d in daemons:
            d.stop()
    settled(store, run.run_id, shared)
    assert len(store.read(lambda c: q.list_runs(c))) == 1
    asked = (shared / "checkins.log").read_text().splitlines()
    assert len([r for r in asked if json.loads(r).get("purpose") == "checkin"]) == 1
    store.close()
