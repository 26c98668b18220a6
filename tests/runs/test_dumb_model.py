"""A harness that expects a dumb model, through the real daemon: a "succeeded" while the state
that started the run still holds is recorded as unconfirmed and the watch tries again after a
cool-down; a run's notices are limited by rate and near-duplicate text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind, RunStatus, StepKind
from tests.configs import FINISH, act, scripted_home
from tests.conftest import Home, ServeHttp, finished, wait_for
from tests.runs.test_watch_level import CONFIG, Service, add_goal, runs

pytestmark = pytest.mark.backends

CLAIMS_SUCCESS = {
    "reason": "all good",
    "action": {"kind": "finish", "outcome": "succeeded", "summary": "fixed it"},
}


@pytest.fixture
def service(http_server: ServeHttp) -> Any:
    handler = type("Svc", (Service,), {"status": 200})
    return handler, http_server(handler)


async def test_a_success_claimed_while_the_trigger_holds_is_unconfirmed_and_retried(
    home: Home,
    service: Any,
    serve: Any,
) -> None:
    handler, url = service
    text = (
        CONFIG.replace("__URL__", url) + "\n[agents.watcher.limits]\nunconfirmed_cooldown_s = 0.3\n"
    )
    home.write_config(text, [CLAIMS_SUCCESS])
    handler.status = 500
    await serve()
    goal_id = await add_goal(home)
    await wait_for(lambda: len(runs(home, goal_id)) >= 2, 30)  # the watch started another run
    first = runs(home, goal_id)[0]
    await wait_for(finished(home, first.run_id))
    assert home.run(first.run_id).status == RunStatus.FAILED
    summary = home.run(first.run_id).summary or ""
    assert "unconfirmed success: health is still unhealthy" in summary and "fixed it" in summary


async def test_a_runs_near_duplicate_notices_are_refused(
    home: Home, tmp_path: Path, serve: Any
) -> None:
    said = [
        "ERROR the service is down, please check the service",
        "error: the service is down! please check the service now",
        "The weather is fine today",
        "Disk usage reached ninety percent on the database host",
        "Fourth different message about an unrelated certificate expiry",
    ]
    replies = [act("notify", message=m) for m in said] + [FINISH]
    home.write_config(scripted_home(["notify", "finish"]), replies)
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id), 30)
    items = home.store.read(lambda c: qi.list_items(c, status=None, run_id=run_id))
    titles = [
        i.title for i in items if i.kind == InboxKind.NOTICE and not i.title.startswith("run ")
    ]
    assert said[1] not in titles  # a near duplicate of the first
    assert len(titles) == 3  # at most max_notices_per_hour (3) in an hour
    refused = [
        s
        for s in home.steps(run_id)
        if s.kind == StepKind.CHECK and "notice limit" in str(s.data.get("rule"))
    ]
    assert len(refused) == 2
