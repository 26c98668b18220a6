"""A check-in whose model refuses the request (a bad key, an unknown model, a prompt past the
context) ends failed and tells the operator once — one open notice naming the cause and the fix,
however many check-ins fire before it is fixed — instead of failing quietly."""

from __future__ import annotations

from agentd.errors import ModelRejected
from agentd.llm import ModelReply, ModelRequest
from tests.outer.test_checkin import Make, goal, world_moves
from tests.outer.test_checkin import make as make  # the fixture, by its name


class Refusing:
    name = "checker"

    async def complete(self, request: ModelRequest) -> ModelReply:
        raise ModelRejected(
            "models.checker: the server does not know this model (HTTP 400)",
            reason="model", cause="HTTP 400, The model `nope` does not exist",
            fix="the server does not know this model; check `model` (and `base_url`)",
        )  # fmt: skip


async def test_a_refused_checkin_model_leaves_one_notice_with_cause_and_fix(make: Make) -> None:
    env = await make([{"verdict": {"kind": "nothing"}}])  # never read: the model is replaced
    env.deps.models["checker"] = Refusing()
    goal_id = goal(env)
    for n in (1, 2):
        world_moves(env, n)
        row = await env.check(goal_id)
        assert row.status == "failed" and "rejected the call" in (row.reason or "")
    (notice,) = env.items(rule="model_refused", status="open")
    assert "does not exist" in notice.title and "check `model`" in notice.body
