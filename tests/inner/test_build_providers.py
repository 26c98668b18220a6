"""Build runs' three calls (plan, generate, judge) through the real Anthropic and OpenAI SDKs,
offline (a mock HTTP transport answering with recorded response shapes): each request carries its
schema as structured output, never tools, and the reply parses into a verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.inner import prompts
from agentd.inner import spec as build_spec
from agentd.llm import ModelRequest
from agentd.llm.openai import strict_schema
from agentd.models import Goal, utcnow

# ruff: noqa: F811  # the provider fixtures are imported by name, as pytest finds them
from tests.llm.test_providers import (  # noqa: F401
    ANTHROPIC,
    VENDORS,
    MakeProvider,
    Vendor,
    assert_strict,
    key,
    make,
)

GOAL = Goal(goal_id=1, title="a backend job", why="rent in Berlin", agent="default",
            status="active", criteria=[], deadline=None, created_at=utcnow(),
            updated_at=utcnow())  # type: ignore[arg-type]  # fmt: skip
SPEC = build_spec.make_spec("a CV for Acme", ["mentions Go"], "Go: 6 years at Initech")
REQS = build_spec.requirement_list(SPEC, GOAL.why, [], [])


@pytest.mark.parametrize("schema", [prompts.PLAN_SCHEMA, prompts.GENERATE_SCHEMA,
                                    prompts.JUDGE_SCHEMA])  # fmt: skip
def test_build_schemas_satisfy_openai_strict_mode(schema: dict[str, Any]) -> None:
    assert_strict(strict_schema(schema))


@pytest.mark.parametrize("vendor", VENDORS)
async def test_judge_call_sends_its_schema_and_the_reply_becomes_a_verdict(
    vendor: Vendor,
    make: MakeProvider,
) -> None:
    reply = {
        "requirements": [{"id": "R1", "pass": False, "evidence": "absent", "fix": "add Go",
                          "needs_info": False}],
        "serves_why": {"pass": True, "reason": "fits", "fix": ""},
        "summary": "Go is missing.",
    }  # fmt: skip
    provider, recorder = make(vendor, lambda r: vendor.reply(json.dumps(reply)))
    system, text = prompts.judge(GOAL, SPEC, REQS, "# CV\nPython only", [], None)
    request = ModelRequest(run_id=1, goal_id=1, decision_no=1, attempt=1, system=system,
                           prompt=text, schema=prompts.JUDGE_SCHEMA, purpose="judge")  # fmt: skip
    got = await provider.complete(request)
    body = recorder.body()
    assert "tools" not in body
    if vendor is ANTHROPIC:
        fmt = body["output_config"]["format"]
        assert fmt["type"] == "json_schema" and "requirements" in fmt["schema"]["properties"]
    else:
        assert body["response_format"]["json_schema"]["name"] == "verdict"
        assert body["response_format"]["json_schema"]["strict"] is True
    value = prompts.parse_object(got.text, ("requirements", "serves_why"))
    verdict = build_spec.merge_verdict(REQS, value, {}, "# CV\nPython only")
    assert verdict["failing"] == ["R1"] and verdict["serves_why"]["pass"] is True


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("purpose", ["plan", "generate"])
async def test_plan_and_generate_calls_send_their_schema(
    vendor: Vendor,
    make: MakeProvider,
    purpose: str,
) -> None:
    schema = prompts.PLAN_SCHEMA if purpose == "plan" else prompts.GENERATE_SCHEMA
    answer = ({"reason": "r", "requirements": [], "question": None} if purpose == "plan"
              else {"notes": "n", "artifact": "# CV\nGo"})  # fmt: skip
    provider, recorder = make(vendor, lambda r: vendor.reply(json.dumps(answer)))
    system, text = (prompts.plan(GOAL, SPEC, [], None) if purpose == "plan" else
                    prompts.generate(GOAL, SPEC, REQS, [], [], None, None))  # fmt: skip
    request = ModelRequest(run_id=1, goal_id=1, decision_no=1, attempt=1, system=system,
                           prompt=text, schema=schema, purpose=purpose)  # fmt: skip
    got = await provider.complete(request)
    assert json.loads(got.text) == answer
    body = json.dumps(recorder.body())
    assert "tools" not in recorder.body()
    assert "Initech" in body  # the material went in, quoted as data
