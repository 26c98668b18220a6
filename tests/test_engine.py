"""The engine end to end, in-process: real SQLite file, scripted model, real commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd import inbox
from agentd.models import InboxKind, RunStatus, StepKind
from tests.conftest import Home, finished, wait_for, waiting

CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.append]
type = "command"
argv = ["sh", "-c", "echo \\"$AGENTD_IDEMPOTENCY_KEY {word}\\" >> __OUT__"]
params = { word = { pattern = "^[a-z]+$" } }

[agents.default]
actions = ["append", "finish", "ask", "sleep", "notify", "wait_event"]
policy = { rules = { __RULES__ } }
"""


def write(home: Home, tmp_path: Path, replies: list[Any], rules: str = "") -> Path:
    out = tmp_path / "out.txt"
    text = CONFIG.replace("__RULES__", rules).replace("__OUT__", str(out))
    home.write_config(text, replies)
    return out


def act(kind: str, **args: Any) -> dict[str, Any]:
    return {"reason": f"do {kind}", "action": {"kind": kind, **args}}


FINISH = act("finish", outcome="succeeded", summary="done")


async def test_engine_runs_allowed_action_then_finishes(home: Home, tmp_path: Path, serve: Any) -> None:
    out = write(home, tmp_path, [act("append", word="hello"), FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(finished(home, run_id))
    assert home.run(run_id).status == RunStatus.SUCCEEDED
    kinds = [s.kind for s in home.steps(run_id)]
    assert kinds == ["start", "observe", "decide", "check", "act", "observe", "decide", "check", "finish"]
    assert out.read_text().split() == [f"{run_id}:5", "hello"]


async def test_engine_gated_action_waits_for_approval(home: Home, tmp_path: Path, serve: Any) -> None:
    out = write(home, tmp_path, [act("append", word="gated"), FINISH], rules='append = "approve"')
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    assert not out.exists()
    (item,) = home.store.read(lambda c: __import__("agentd.db.items").db.items.list_items(c))
    assert item.kind == InboxKind.APPROVAL and item.args == {"word": "gated"}
    inbox.approve(home.store, home.store_config if False else _cfg(home), item.item_id)
    await wait_for(finished(home, run_id))
    assert out.read_text().split()[1:] == ["gated"]


def _cfg(home: Home) -> Any:
    from agentd import config

    return config.load(home.paths.config)
