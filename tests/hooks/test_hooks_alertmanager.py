"""Debian's Alertmanager drives the service-watch scenario end to end through `/hooks/am` (issue
29): an alert fires → one run of the watching agent starts (a repeated notification starts none)
→ its decision prompt quotes the alert's labels → the approval's evidence names the alert →
approve → the action runs once → the alert resolves → the waiting run wakes and sees it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import StepKind
from agentd.operator import evidence
from agentd.views import evidence as ev
from tests.alertmanager import running
from tests.api.test_api import client
from tests.conftest import Home, closed_port, wait_for
from tests.hooks.hooksupport import SECRETS, events, secrets

__all__ = ["secrets"]
pytestmark = [pytest.mark.usefixtures("secrets"), pytest.mark.timeout(120)]

CONFIG = """
[daemon]
poll_interval_s = 0.02

[api]
port = {port}

[hooks.am]
type = "alertmanager"
token_env = "HOOK_AM_TOKEN"

[models.default]
provider = "scripted"
replies = "replies.json"
request_log = "{log}"

[actions.restart]
type = "command"
argv = ["sh", "-c", "echo restarted >> {out}"]

[agents.default]
actions = ["restart", "wait_event", "finish"]
triggers = ["am.firing"]
policy = {{ rules = {{ restart = "approve" }} }}
"""
REPLIES = [
    {"reason": "checkout is down", "action": {"kind": "restart"}},
    {"reason": "wait for recovery", "action": {"kind": "wait_event", "event": "am.resolved",
                                                "match": {"alertname": "CheckoutDown"}}},
    {"reason": "recovered", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}},
]  # fmt: skip
LABELS = {"alertname": "CheckoutDown", "service": "checkout", "severity": "page"}
NOTES = {"summary": "checkout answers 503", "runbook": "restart it"}


def runs(home: Home) -> list[Any]:
    return home.store.read(lambda c: q.list_runs(c, limit=100))


async def hooks_seen(home: Home) -> dict[str, Any]:
    async with client(home, home.paths.api_token.read_text().strip()) as c:
        return dict((await c.get("/api/hooks")).json()["hooks"].get("am", {}))


async def test_hooks_alertmanager_drives_the_service_watch_scenario(
    home: Home, serve: Any, tmp_path: Path
) -> None:
    port, out, log = closed_port(), tmp_path / "restarted", tmp_path / "requests.jsonl"
    home.write_config(CONFIG.format(port=port, out=out, log=log), REPLIES)
    goal_id = home.add_goal()
    await serve()
    hook = f"http://127.0.0.1:{port}/hooks/am"
    with running(tmp_path / "am", hook, SECRETS["HOOK_AM_TOKEN"]) as am:
        starts = datetime.now(UTC)
        await asyncio.to_thread(am.fire, LABELS, NOTES, starts)
        await wait_for(lambda: bool(home.store.read(lambda c: qi.list_items(c, status="open"))), 30)

        # Alertmanager repeats the notification (repeat_interval 1s): recorded once, no new run.
        async def repeated() -> bool:
            return int((await hooks_seen(home)).get("duplicates", 0)) >= 2

        for _ in range(300):
            if await repeated():
                break
            await asyncio.sleep(0.1)
        assert await repeated()
        (run,) = runs(home)
        assert run.goal_id == goal_id and run.trigger == "event:am.firing"
        (event,) = [e for e in events(home) if e.name == "am.firing"]
        assert event.source == "hook:am" and event.data["labels"] == LABELS

        # The decision saw the alert, quoted; the approval's evidence names it.
        first = json.loads(log.read_text().splitlines()[0])
        assert "The event that started this run" in first["prompt"]
        assert (
            '"alertname": "CheckoutDown"' in first["prompt"]
            and "checkout answers 503" in first["prompt"]
        )
        (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
        shown = evidence.of_item(home.store, item)
        assert shown is not None and shown["started_by"]["alert"] == "CheckoutDown"
        text = "\n".join(ev.lines(shown, None))
        assert "started by am.firing" in text and "service=checkout" in text

        # Approve: the action runs once, the run waits for the alert's resolution.
        async with client(home, home.paths.api_token.read_text().strip()) as c:
            assert (await c.post(f"/api/inbox/{item.item_id}/approve")).status_code == 200
        await wait_for(lambda: runs(home)[0].status == "waiting" and out.exists(), 30)

        await asyncio.to_thread(am.resolve, LABELS, NOTES, starts)
        await wait_for(lambda: runs(home)[0].status == "succeeded", 60)
    assert out.read_text() == "restarted\n"
    steps = home.store.read(lambda c: q.list_steps(c, run.run_id))
    (wake,) = [s for s in steps if s.kind == StepKind.WAKE and s.data.get("woke_by") == "event"]
    assert wake.data["event"] == "am.resolved" and wake.data["data"]["status"] == "resolved"
    assert len(runs(home)) == 1  # the resolution started nothing new
