"""A local OpenAI-compatible server's answers (llama-cpp-python 0.3.36 serving SmolLM2-135M, in
tests/fixtures/llama_cpp_python/: the HTTP 500 naming `response_format.type` and the HTTP 400
context overflow recorded from the live server; the completion with a raw newline in a string is
its shape with such a content) through the OpenAI SDK's HTTP layer: the
structured-output probe, refusals read by meaning, the concurrency limit, and the schema a
grammar can enforce."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentd import config
from agentd.config import OpenAIModel
from agentd.errors import ModelRejected
from agentd.harness.menu import Menu
from agentd.llm import ModelRequest
from agentd.llm.openai import OpenAIProvider, strict_schema

RECORDED = Path(__file__).parent.parent / "fixtures" / "llama_cpp_python"
BASE_URL = "http://127.0.0.1:8000/v1"

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart]
type = "command"
argv = ["systemctl", "restart", "{unit}"]
params = { unit = { choices = ["web.service"], description = "which unit" } }

[agents.default]
actions = ["restart", "notify", "sleep", "finish"]
"""

Answer = Callable[[httpx2.Request], Any]


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def reply(text: str) -> dict[str, Any]:
    body = recorded("chat_completion_raw_newline.json")
    body["choices"][0]["message"]["content"] = text
    return body


RESTART = json.dumps({"reason": "down", "action": {"kind": "restart", "unit": "web.service"}})


def refuses_json_schema(request: httpx2.Request) -> httpx2.Response:
    """llama-cpp-python: `response_format.type` must be "text" or "json_object" (HTTP 500)."""
    fmt = json.loads(request.content).get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return httpx2.Response(500, json=recorded("error_500_response_format.json"))
    return httpx2.Response(200, json=reply(RESTART))


class Server:
    """A MockTransport handler that records the request bodies."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.bodies: list[Any] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        out = self.answer(request)
        if asyncio.iscoroutine(out):
            out = await out
        return out if isinstance(out, httpx2.Response) else httpx2.Response(200, json=out)


Make = Callable[..., tuple[OpenAIProvider, Server]]


@pytest.fixture
async def make() -> AsyncIterator[Make]:
    clients: list[httpx2.AsyncClient] = []

    def build(answer: Answer, **cfg: Any) -> tuple[OpenAIProvider, Server]:
        server = Server(answer)
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
        clients.append(client)
        settings = OpenAIModel(provider="openai", model="smollm2", base_url=BASE_URL, **cfg)
        return OpenAIProvider("local", settings, http_client=client), server

    yield build
    for client in clients:
        await client.aclose()


@pytest.fixture
def menu(tmp_path: Path) -> Menu:
    cfg = config.parse(CONFIG, tmp_path / "config.toml")
    return Menu(cfg, cfg.agents["default"])


@pytest.fixture
def request_(menu: Menu) -> ModelRequest:
    return ModelRequest(
        run_id=1, goal_id=1, decision_no=1, attempt=1, system="Decide.",
        prompt="# World now\n<data>{}</data>", schema=menu.schema(),
    )  # fmt: skip


# ── structured output: probed once, remembered ───────────────────────────────────────────────────


async def test_auto_structured_output_falls_back_to_json_object_and_remembers_it(
    make: Make, request_: ModelRequest
) -> None:
    provider, server = make(refuses_json_schema)
    first = await provider.complete(request_)
    await provider.complete(request_)
    assert json.loads(first.text)["action"]["kind"] == "restart"
    kinds = [b["response_format"]["type"] for b in server.bodies]
    assert kinds == ["json_schema", "json_object", "json_object"]  # probed once
    assert server.bodies[1]["response_format"]["schema"]["type"] == "object"
    assert provider.structured_output == "json_object"


async def test_structured_output_prompt_sends_the_schema_in_the_system_text(
    make: Make, request_: ModelRequest
) -> None:
    provider, server = make(lambda r: reply(RESTART), structured_output="prompt")
    await provider.complete(request_)
    sent = server.bodies[0]
    assert "response_format" not in sent
    assert (
        '"anyOf"' in sent["messages"][0]["content"]
        and "JSON schema" in sent["messages"][0]["content"]
    )


async def test_a_500_naming_response_format_is_a_refusal_with_its_fix_not_an_outage(
    make: Make, request_: ModelRequest
) -> None:
    provider, _ = make(refuses_json_schema, structured_output="json_schema")
    with pytest.raises(ModelRejected) as refused:
        await provider.complete(request_)
    assert refused.value.reason == "format"
    assert "response_format" in refused.value.cause and "structured_output" in refused.value.fix


async def test_a_context_overflow_names_the_context_and_the_setting(
    make: Make, request_: ModelRequest
) -> None:
    overflow = recorded("error_400_context.json")
    provider, _ = make(lambda r: httpx2.Response(400, json=overflow))
    with pytest.raises(ModelRejected) as refused:
        await provider.complete(request_)
    assert refused.value.reason == "context" and refused.value.context_tokens == 4096
    assert "4096-token context" in str(refused.value)
    assert "models.local.context_tokens = 4096" in refused.value.fix


async def test_an_unknown_model_is_a_refusal_naming_the_model_setting(
    make: Make, request_: ModelRequest
) -> None:
    unknown = recorded("error_400_model.json")
    provider, _ = make(lambda r: httpx2.Response(400, json=unknown))
    with pytest.raises(ModelRejected) as refused:
        await provider.complete(request_)
    assert refused.value.reason == "model" and "`model`" in refused.value.fix


# ── time and load ────────────────────────────────────────────────────────────────────────────────


def test_a_long_timeout_is_not_cut_by_a_hidden_ceiling() -> None:
    from agentd.config import call_timeout_s  # new: the loops' one source of a call's limit

    slow = OpenAIModel(provider="openai", model="m", base_url=BASE_URL, timeout_s=600)
    assert call_timeout_s(slow) > 600


async def test_a_local_server_gets_one_call_at_a_time(make: Make, request_: ModelRequest) -> None:
    in_flight: list[int] = [0, 0]  # now, most ever
    release = asyncio.Event()

    async def slow(request: httpx2.Request) -> dict[str, Any]:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await release.wait()
        in_flight[0] -= 1
        return reply(RESTART)

    provider, server = make(slow, structured_output="json_object")
    calls = [asyncio.create_task(provider.complete(request_)) for _ in range(3)]
    while not server.bodies:
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(*calls)
    assert in_flight[1] == 1 and len(server.bodies) == 3


# ── replies and schemas ──────────────────────────────────────────────────────────────────────────


def test_a_reply_with_a_raw_newline_inside_a_string_parses(menu: Menu) -> None:
    raw = recorded("chat_completion_raw_newline.json")["choices"][0]["message"]["content"]
    assert "\n" in raw
    decision = menu.parse(raw)
    assert decision.action == "restart" and "\n" in decision.reason


def test_a_local_schema_keeps_a_short_max_length_for_the_grammar() -> None:
    """A short limit is kept for the server's grammar; a long one (llama-cpp-python failed to parse
    the grammar of maxLength 4000 and dropped the connection, live) stays a hint."""
    raw = {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "maxLength": 80},
            "message": {"type": "string", "maxLength": 4000},
        },
    }
    local = strict_schema(raw, keep_lengths=True)["properties"]
    assert local["unit"]["maxLength"] == 80
    assert (
        "maxLength" not in local["message"] and "maxLength: 4000" in local["message"]["description"]
    )


def test_sleep_is_two_variants_each_with_its_field_required(menu: Menu) -> None:
    sleep = strict_schema(menu.schema(), keep_lengths=True)["$defs"]["Sleep"]
    variants = {tuple(v["required"]): v for v in sleep["anyOf"]}
    assert set(variants) == {("kind", "seconds"), ("kind", "until")}
    assert variants[("kind", "seconds")]["properties"]["seconds"]["type"] == "number"
    assert menu.parse('{"action": {"kind": "sleep", "seconds": 5}}').args == {"seconds": 5.0}
