"""Secrets stay secret (DESIGN.md §4.6), end to end: a recognizable fake API key, the real Anthropic
SDK on a mock transport inside a real daemon, the error paths (429, timeout, 5xx, 401) and a crash —
then the key is searched for in the logs, the database files and every prompt that was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from agentd import config, log
from agentd.daemon import serve as daemon
from agentd.db import items as qi
from agentd.llm.anthropic import AnthropicProvider
from agentd.models import RunStatus, StepKind
from tests.conftest import Home, finished, wait_for

KEY = "sk-ant-api03-SECRET-4242-do-not-leak"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "anthropic"

CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "anthropic"
model = "claude-test"
api_key_env = "AGENTD_TEST_ANTHROPIC_KEY"

[agents.default]
actions = ["notify", "finish"]
limits = { retry_base_s = 0.05, retry_max_s = 0.2 }
"""


def message(action: dict[str, Any]) -> httpx2.Response:
    body = json.loads((FIXTURES / "message.json").read_text())
    body["content"][0]["text"] = json.dumps({"reason": "test", "action": action})
    return httpx2.Response(200, json=body)


def error(status: int, **headers: str) -> httpx2.Response:
    body = json.loads((FIXTURES / f"error_{status}.json").read_text())
    return httpx2.Response(status, json=body, headers=headers)


def timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("read timed out", request=request)


class Vendor:
    """Answers in order; remembers every request (headers and prompt bodies)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else error(401)
        return answer(request) if callable(answer) else answer

    def provider(self, cfg: config.Config) -> AnthropicProvider:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return AnthropicProvider("default", cfg.models["default"], http_client=client)  # type: ignore[arg-type]


async def serve_until(
    home: Home, vendor: Vendor, done: Callable[[], bool], *, crash: bool = False
) -> None:
    cfg = config.load(home.paths.config)
    stop = asyncio.Event()
    task = asyncio.create_task(
        daemon.serve(home.paths, cfg, stop=stop, models={"default": vendor.provider(cfg)})
    )
    try:
        await wait_for(done, timeout_s=15)
    finally:
        if crash:
            task.cancel()  # no graceful stop: what is committed is all that survives
        else:
            stop.set()
        await asyncio.gather(task, return_exceptions=True)


async def test_secrets_never_reach_logs_database_or_prompts(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_TEST_ANTHROPIC_KEY", KEY)
    home.write_config(CONFIG)
    log_file = tmp_path / "daemon.log"
    with log_file.open("w") as stream:
        log.configure("debug", fmt="json", stream=stream)
        finish = message({"kind": "finish", "outcome": "succeeded", "summary": "ok"})
        # A second `finish` in case the crash lands between a request and its journal entry.
        vendor = Vendor(
            [error(429, **{"retry-after": "0"}), timeout, error(529),
             message({"kind": "notify", "message": "noted"}), finish, finish]
        )  # fmt: skip
        first = home.start_run(home.add_goal())
        noted = lambda: any(s.kind == StepKind.ACT for s in home.steps(first))  # noqa: E731
        await serve_until(home, vendor, noted, crash=True)
        await serve_until(home, vendor, finished(home, first))
        refusing = Vendor([error(401)])
        second = home.start_run(home.add_goal(title="second"))
        parked = lambda: home.run(second).status == RunStatus.WAITING  # noqa: E731
        await serve_until(home, refusing, parked)
    log.configure("info")

    assert home.run(first).status == RunStatus.SUCCEEDED
    # 401: no retry storm; the run waits on one question naming the key's variable
    assert home.run(second).status == RunStatus.WAITING
    (asked,) = [i for i in home.store.read(qi.list_items) if i.rule == "model_refused"]
    assert "AGENTD_TEST_ANTHROPIC_KEY" in asked.body and KEY not in asked.body
    assert 5 <= len(vendor.requests) <= 6 and len(refusing.requests) == 1
    for request in vendor.requests + refusing.requests:  # the key: in the auth header, only
        assert KEY in (
            request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
        )
        assert KEY.encode() not in request.content
    assert KEY not in log_file.read_text()
    assert "llm.failed" in log_file.read_text()  # the error paths were logged, without the key
    for db_file in home.root.glob("agentd.db*"):
        assert KEY.encode() not in db_file.read_bytes(), db_file.name


async def test_crash_during_backoff_neither_loses_nor_repeats_the_decision(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_TEST_ANTHROPIC_KEY", KEY)
    home.write_config(CONFIG.replace("retry_base_s = 0.05", "retry_base_s = 1.0"))
    finish = message({"kind": "finish", "outcome": "succeeded", "summary": "ok"})
    vendor = Vendor([error(429, **{"retry-after": "1"}), finish])
    run_id = home.start_run(home.add_goal())
    backing_off = lambda: home.run(run_id).status == RunStatus.WAITING  # noqa: E731
    await serve_until(home, vendor, backing_off, crash=True)  # killed while it sleeps on a 429
    wake_at = home.run(run_id).next_wake_at
    await serve_until(home, vendor, finished(home, run_id))
    assert home.run(run_id).status == RunStatus.SUCCEEDED
    assert len(vendor.requests) == 2  # the 429, then exactly one more call
    decides = [s for s in home.steps(run_id) if s.kind == StepKind.DECIDE]
    assert len(decides) == 1
    assert wake_at is not None and decides[0].created_at >= wake_at  # the backoff was honoured
