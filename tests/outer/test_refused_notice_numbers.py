"""One notice per refusal even when the server's message counts something different each time
(seen live: llama-cpp-python's "you requested 2743 tokens" then "2761 tokens" left two notices
for the same context overflow)."""

from __future__ import annotations

import itertools

from agentd.errors import ModelRejected
from agentd.llm import ModelReply, ModelRequest
from tests.outer.test_checkin import Make, goal, world_moves
from tests.outer.test_checkin import make as make  # the fixture, by its name

COUNT = itertools.count(2743, 18)


class Overflowing:
    name = "checker"

    async def complete(self, request: ModelRequest) -> ModelReply:
        said = f"HTTP 400, you requested {next(COUNT)} tokens; the maximum context is 2048"
        raise ModelRejected(said, reason="context", cause=said, fix="set context_tokens")


async def test_a_refusal_counting_other_tokens_each_time_leaves_one_notice(make: Make) -> None:
    env = await make([{"verdict": {"kind": "nothing"}}])  # never read: the model is replaced
    env.deps.models["checker"] = Overflowing()
    goal_id = goal(env)
    for n in (1, 2):
        world_moves(env, n)
        row = await env.check(goal_id)
        assert row.status == "failed"
    (notice,) = env.items(rule="model_refused", status="open")
    assert "2743 tokens" in notice.title
