"""A home fresh from `agentd init`, no API key: its placeholder model answers every purpose.

A check-in that needs the model used to fail with "invalid reply after 2 tries: reply must be an
object {"reason", "next_look_in_s", "verdict"}" because the placeholder held only a run decision.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.clock import ManualClock
from agentd.config import Config, load
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.store import Store
from agentd.llm import ModelRequest
from agentd.outer import checkin
from agentd.runs.deps import Deps

T0 = 1_780_000_000.0


@pytest.fixture
async def fresh(tmp_path: Path) -> AsyncIterator[tuple[Config, Store, Deps]]:
    """A home made by `agentd init` (through the CLI), its store open, the daemon's deps built."""
    root = tmp_path / "home"
    result = CliRunner().invoke(app, ["--home", str(root), "init"])
    assert result.exit_code == 0, result.output
    cfg = load(root / "config.toml")
    store = Store(root / "agentd.db")
    await store.open()
    try:
        yield cfg, store, daemon.build_deps(cfg, store, owner="test:1")
    finally:
        await store.close()


async def test_a_fresh_homes_check_in_decides_without_errors(
    fresh: tuple[Config, Store, Deps],
) -> None:
    cfg, store, deps = fresh
    deps.clock = ManualClock(T0)
    agent = next(iter(cfg.agents))
    goal_id = await store.write(lambda c: q.add_goal(
        c, title="keep the site up", why="customers use it", agent=agent,
        criteria=["the site answers"], deadline=None,
    ))  # fmt: skip
    changed = {"site": {"status": [200, 500]}}
    await store.write(
        lambda c: worlds.add_snapshot(c, agent, None, {"site": {"status": 500}}, changed)
    )
    checkin_id = await store.write(lambda c: qc.add_due(c, goal_id, T0, T0))
    await checkin.run_checkin(deps, checkin_id, lambda run_id, epoch: None)
    done = await store.read(lambda c: qc.get(c, checkin_id))
    assert done.precheck["reasons"] == ["the world changed (1 look)"]  # the model was asked
    assert done.status == "done", (done.status, done.reason)
    assert done.effect == {"kind": "nothing"}


async def test_the_placeholder_answers_every_purpose(fresh: tuple[Config, Store, Deps]) -> None:
    cfg, _, deps = fresh
    model = deps.models[next(iter(cfg.models))]
    shapes = {"decide": "action", "checkin": "verdict", "plan": "requirements",
              "generate": "artifact", "judge": "serves_why", "summarize": "summary"}  # fmt: skip
    for purpose, key in shapes.items():
        request = ModelRequest(
            run_id=1, goal_id=1, decision_no=1, attempt=1, system="s", prompt="p",
            schema={}, purpose=purpose,
        )  # fmt: skip
        reply = await model.complete(request)
        assert key in json.loads(reply.text), purpose
