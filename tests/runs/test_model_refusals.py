"""A model server's refusals and outages reach the operator, through the real daemon and the
OpenAI SDK's HTTP layer answering with llama-cpp-python's recorded bodies: a refused request parks
every run it stops on ONE question naming the cause and the fix (no retry storm), an outage is
retried a bounded number of times and then asks the same way, and a call abandoned on its
timeout still counts in `agentd usage`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from agentd import config
from agentd.db import accounting
from agentd.db import items as qi
from agentd.llm.openai import OpenAIProvider
from agentd.models import InboxKind, RunStatus
from agentd.operator import inbox
from tests.configs import FINISH
from tests.conftest import Home, finished, wait_for, waiting

RECORDED = Path(__file__).parent.parent / "fixtures" / "llama_cpp_python"

CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "openai"
model = "smollm2"
base_url = "http://127.0.0.1:8000/v1"
structured_output = "__MODE__"

[agents.default]
actions = ["notify", "finish"]
limits = { retry_base_s = 0.02, retry_max_s = 0.05, max_model_retries = 2 }
"""


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


def completion(action: dict[str, Any]) -> httpx2.Response:
    body = recorded("chat_completion_raw_newline.json")
    body["choices"][0]["message"]["content"] = json.dumps(action)
    return httpx2.Response(200, json=body)


class Server:
    """Answers every request with `answer` (a test may swap it); counts the requests."""

    def __init__(self, answer: Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.answer = answer
        self.requests = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        return self.answer(request)

    def models(self, home: Home) -> dict[str, Any]:
        cfg = config.load(home.paths.config)
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return {"default": OpenAIProvider("default", cfg.models["default"], http_client=client)}  # type: ignore[arg-type]


def open_refusals(home: Home) -> list[Any]:
    items = home.store.read(lambda c: qi.list_items(c))
    return [i for i in items if i.rule == "model_refused"]


async def test_a_refused_request_parks_every_run_on_one_question_with_cause_and_fix(
    home: Home, serve: Any
) -> None:
    home.write_config(CONFIG.replace("__MODE__", "json_schema"))
    refusal = recorded("error_500_response_format.json")
    server = Server(lambda r: httpx2.Response(500, json=refusal))
    runs = [home.start_run(home.add_goal(title=f"goal {n}")) for n in (1, 2)]
    await serve(models=server.models(home))
    for run_id in runs:
        await wait_for(waiting(home, run_id))
    (question,) = open_refusals(home)
    assert question.kind == InboxKind.QUESTION
    assert (
        "response_format" in question.body and 'structured_output to "json_object"' in question.body
    )
    assert server.requests == 2  # one call per run, no retries

    server.answer = lambda r: completion(FINISH)  # the operator fixed the server
    inbox.answer(home.store, question.item_id, "fixed")
    for run_id in runs:
        await wait_for(finished(home, run_id))
        assert home.run(run_id).status == RunStatus.SUCCEEDED


async def test_an_outage_is_retried_a_bounded_number_of_times_then_asks(
    home: Home, serve: Any
) -> None:
    home.write_config(CONFIG.replace("__MODE__", "json_object"))
    server = Server(lambda r: httpx2.Response(503, json={"error": {"message": "loading"}}))
    run_id = home.start_run(home.add_goal())
    await serve(models=server.models(home))
    await wait_for(lambda: bool(open_refusals(home)), 20)
    (question,) = open_refusals(home)
    # max_model_retries = 2: the first call and two retries failed, and the title says three
    assert "3 failed calls in a row" in question.title and "doctor --ping" in question.body
    assert home.run(run_id).status == RunStatus.WAITING and server.requests == 3


async def test_a_call_abandoned_on_its_timeout_counts_in_usage(home: Home, serve: Any) -> None:
    home.write_config(CONFIG.replace("__MODE__", "json_object"))
    answers = iter(["timeout", "finish"])

    def answer(request: httpx2.Request) -> httpx2.Response:
        if next(answers) == "timeout":
            raise httpx2.ReadTimeout("timed out", request=request)
        return completion(FINISH)

    run_id = home.start_run(home.add_goal())
    await serve(models=Server(answer).models(home))
    await wait_for(finished(home, run_id))
    (row,) = home.store.read(lambda c: accounting.usage(c))
    assert row["calls"] == 2  # the abandoned call and the answered one
    assert row["tokens_in"] > 1952  # the answer's 1952 and the abandoned prompt, estimated
