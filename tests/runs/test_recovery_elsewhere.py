"""Recovery of an action started on another host (a database several daemons share): its command
may still run there, out of this daemon's reach, so a non-idempotent one is asked about — never
verified and re-run — while one started on this host is fenced, verified and re-run as before."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from agentd.db import leases
from agentd.db import queries as q
from agentd.models import StepKind, StepStatus
from tests.configs import FINISH, append_action, scripted_home
from tests.conftest import Home, finished, wait_for
from tests.runs.test_engine import LAPSED_LEASE_S, answer_question

pytestmark = pytest.mark.backends


def home_with_intent(
    home: Home, tmp_path: Path, host: str, *, spawned_record: bool = True
) -> tuple[int, Path]:
    out = tmp_path / "out.txt"
    verify = json.dumps(["sh", "-c", "echo not-done"])  # what verify says: it did not happen
    tables = append_action(out).replace("\n\n", f"\nverify_argv = {verify}\n\n", 1)
    home.write_config(scripted_home(("append", "finish", "ask"), tables=tables), [FINISH])
    run_id = home.start_run(home.add_goal())
    spawned = {"pgid": 2**22 + 7, "start": 1, "boot_id": "another-boot", "host": host}

    # The intent names its host; the spawn record, committed after the fork, may be missing
    # (the daemon froze or died in between).
    data: dict[str, Any] = {"host": host, **({"spawned": spawned} if spawned_record else {})}

    def intent(c: Any) -> None:
        epoch = leases.claim_run(c, run_id, "dead-daemon", LAPSED_LEASE_S)
        q.append_step(c, run_id, epoch, StepKind.ACT, status=StepStatus.STARTED,
                      action="append", args={"word": "once"}, data=data)  # fmt: skip

    home.store.write(intent)
    return run_id, out


@pytest.mark.parametrize("spawned_record", [True, False], ids=["spawned", "intent-only"])
async def test_an_action_started_on_another_host_is_asked_about(
    home: Home, tmp_path: Path, serve: Any, spawned_record: bool
) -> None:
    run_id, out = home_with_intent(home, tmp_path, "another-host", spawned_record=spawned_record)
    await serve()
    body = await answer_question(home, run_id, "it did not happen; fine to finish")
    assert "another-host" in body and "cannot tell whether it happened" in body
    await wait_for(finished(home, run_id))
    assert not out.exists()  # verify said "not done", and still nothing ran again


async def test_an_action_started_on_this_host_is_verified_and_rerun(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    run_id, out = home_with_intent(home, tmp_path, socket.gethostname())
    await serve()
    await wait_for(finished(home, run_id))
    assert out.read_text().split()[1:] == ["once"]
