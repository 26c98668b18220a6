"""The anthropic and openai providers, offline, through the real SDK clients.

Each test hands the SDK an `httpx2.MockTransport` whose handler returns a recorded response body
(tests/fixtures/) or raises a transport error, so the SDK's own request building, response parsing
and exception mapping run for real. Validation stays outside the providers: they return raw text,
and `agentd.harness.menu.Menu` accepts or rejects it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

import anthropic
import httpx2
import pytest
import structlog
from pydantic import BaseModel, Field
from structlog.testing import capture_logs

from agentd import config
from agentd.config import AnthropicModel, OpenAIModel
from agentd.errors import ConfigError, ModelError, ModelOutputInvalid, ModelRejected
from agentd.harness.menu import Menu
from agentd.llm import SUMMARY_SCHEMA, Model, ModelReply, ModelRequest, build, retry_after_s
from agentd.llm.anthropic import AnthropicProvider
from agentd.llm.openai import OpenAIProvider, strict_schema

FIXTURES = Path(__file__).parent.parent / "fixtures"
KEY = "sk-test-SECRET-123"
KEY_ENV = "AGENTD_TEST_MODEL_KEY"
AUTH_HEADERS = ("authorization", "x-api-key")

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart]
type = "command"
argv = ["systemctl", "restart", "{unit}"]
params = { unit = { choices = ["web.service"], description = "which unit" } }

[actions.page]
type = "http"
urls = ["http://127.0.0.1:9/page"]

[agents.default]
actions = ["restart", "page", "sleep", "wait_event", "finish"]
"""

RESTART = {"reason": "HTTP 502 since 09:12", "action": {"kind": "restart", "unit": "web.service"}}

Handler = Callable[[httpx2.Request], httpx2.Response | Awaitable[httpx2.Response]]


def fixture(path: str) -> Any:
    return json.loads((FIXTURES / path).read_text())


@dataclass(frozen=True)
class Vendor:
    """What differs between the two vendors, so each behaviour is one test run for both."""

    name: Literal["anthropic", "openai"]
    overloaded_status: int  # the "try again later" status each vendor actually sends

    def config(self, **overrides: Any) -> AnthropicModel | OpenAIModel:
        raw = {"provider": self.name, "model": "test-model", "api_key_env": KEY_ENV, **overrides}
        return AnthropicModel(**raw) if self.name == "anthropic" else OpenAIModel(**raw)

    def reply(self, text: str, stop: str = "end") -> Any:
        """A recorded success body carrying `text`, ended for `stop` ("end" or "max_tokens")."""
        if self.name == "anthropic":
            body = fixture("anthropic/message.json")
            body["content"][0]["text"] = text
            body["stop_reason"] = {"end": "end_turn", "max_tokens": "max_tokens"}[stop]
            return body
        body = fixture("openai/chat_completion.json")
        body["choices"][0]["message"]["content"] = text
        body["choices"][0]["finish_reason"] = {"end": "stop", "max_tokens": "length"}[stop]
        return body

    def refusal(self) -> Any:
        return fixture(f"{self.name}/refusal.json")

    def error(self, status: int) -> Any:
        return fixture(f"{self.name}/error_{status}.json")


ANTHROPIC = Vendor("anthropic", overloaded_status=529)
OPENAI = Vendor("openai", overloaded_status=503)
VENDORS = [pytest.param(ANTHROPIC, id="anthropic"), pytest.param(OPENAI, id="openai")]


class Recorder:
    """The requests a provider sent, and the handler that answers them."""

    def __init__(self, answer: Callable[[httpx2.Request], Any]) -> None:
        self.requests: list[httpx2.Request] = []
        self._answer = answer

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self._answer(request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer if isinstance(answer, httpx2.Response) else httpx2.Response(200, json=answer)

    def body(self, n: int = 0) -> Any:
        return json.loads(self.requests[n].content)


MakeProvider = Callable[..., tuple[Model, Recorder]]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture
async def make(key: str) -> AsyncIterator[MakeProvider]:
    """Build a provider for a vendor whose HTTP is answered by `answer(request)`."""
    clients: list[httpx2.AsyncClient] = []

    def build_provider(
        vendor: Vendor, answer: Callable[[httpx2.Request], Any], **cfg: Any
    ) -> tuple[Model, Recorder]:
        recorder = Recorder(answer)
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(recorder))
        clients.append(client)
        settings = vendor.config(**cfg)
        if isinstance(settings, AnthropicModel):
            return AnthropicProvider("m", settings, http_client=client), recorder
        return OpenAIProvider("m", settings, http_client=client), recorder

    yield build_provider
    for client in clients:
        await client.aclose()


@pytest.fixture
def menu(tmp_path: Path) -> Menu:
    cfg = config.parse(CONFIG, tmp_path / "config.toml")
    return Menu(cfg, cfg.agents["default"])


@pytest.fixture
def request_(menu: Menu) -> ModelRequest:
    return ModelRequest(
        run_id=1,
        goal_id=1,
        decision_no=1,
        attempt=1,
        system="You are the decision step of a background agent.",
        prompt="# Goal 1: keep web healthy\n# World now\n<data>{}</data>",
        schema=menu.schema(),
    )


def status(code: int, body: Any, **headers: str) -> Callable[[httpx2.Request], httpx2.Response]:
    return lambda request: httpx2.Response(code, json=body, headers=headers)


def read_timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out reading the response", request=request)


# ── replies: the provider returns raw text; the menu decides what is valid ─────────────────────


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_valid_decision_parses_with_the_menu(
    vendor: Vendor, make: MakeProvider, menu: Menu, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, lambda r: vendor.reply(json.dumps(RESTART)))
    reply = await provider.complete(request_)
    decision = menu.parse(reply.text)
    assert (decision.action, decision.args) == ("restart", {"unit": "web.service"})
    assert reply.stop_reason == "end"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_returns_invalid_json_raw_for_the_menu_to_reject(
    vendor: Vendor, make: MakeProvider, menu: Menu, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, lambda r: vendor.reply('{"reason": "x", "action": {'))
    reply = await provider.complete(request_)
    assert reply.text == '{"reason": "x", "action": {'
    with pytest.raises(ModelOutputInvalid, match="not valid JSON"):
        menu.parse(reply.text)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_returns_an_action_off_the_menu_for_the_menu_to_reject(
    vendor: Vendor, make: MakeProvider, menu: Menu, request_: ModelRequest
) -> None:
    off_menu = json.dumps({"reason": "faster", "action": {"kind": "reboot", "host": "web1"}})
    provider, _ = make(vendor, lambda r: vendor.reply(off_menu))
    reply = await provider.complete(request_)
    with pytest.raises(ModelOutputInvalid, match="unknown action 'reboot'"):
        menu.parse(reply.text)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_reports_truncated_output_as_max_tokens(
    vendor: Vendor, make: MakeProvider, menu: Menu, request_: ModelRequest
) -> None:
    cut = json.dumps(RESTART)[:40]
    provider, _ = make(vendor, lambda r: vendor.reply(cut, stop="max_tokens"))
    reply = await provider.complete(request_)
    assert (reply.text, reply.stop_reason) == (cut, "max_tokens")
    with pytest.raises(ModelOutputInvalid):
        menu.parse(reply.text)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_reports_a_refusal_with_its_text(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, lambda r: vendor.refusal())
    reply = await provider.complete(request_)
    assert reply.stop_reason == "refusal"
    assert reply.text in (
        "This request could enable harm to systems the operator does not control.",
        "I'm sorry, but I can't help with that request.",
    )


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_reports_model_and_usage_with_cached_tokens_inside_tokens_in(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, lambda r: vendor.reply(json.dumps(RESTART)))
    reply = await provider.complete(request_)
    # Both fixtures: 1848 prompt tokens of which 1536 came from the cache.
    assert (reply.tokens_in, reply.tokens_cached) == (1848, 1536)
    assert reply.tokens_out in (38, 31)
    assert reply.model in ("claude-sonnet-4-5-20250929", "gpt-4.1-mini-2025-04-14")


# ── failures: retry durably (ModelError) or stop the run (ModelRejected) ─────────────────────────


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_rate_limit_carries_retry_after(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    provider, recorder = make(vendor, status(429, vendor.error(429), **{"retry-after": "7"}))
    with pytest.raises(ModelError, match="rate limited") as e:
        await provider.complete(request_)
    assert e.value.retry_after_s == 7
    assert len(recorder.requests) == 1  # no SDK retry: the engine backs off durably


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_overloaded_is_worth_a_retry(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    code = vendor.overloaded_status
    provider, recorder = make(vendor, status(code, vendor.error(code)))
    with pytest.raises(ModelError, match=f"HTTP {code}") as e:
        await provider.complete(request_)
    assert e.value.retry_after_s is None
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_read_timeout_is_worth_a_retry(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, read_timeout)
    with pytest.raises(ModelError, match="timed out"):
        await provider.complete(request_)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_gives_up_on_a_slow_reply_after_timeout_s(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    async def slow(request: httpx2.Request) -> Any:
        await asyncio.sleep(30)
        return vendor.reply("{}")

    provider, _ = make(vendor, slow, timeout_s=0.05)
    with pytest.raises(ModelError, match=r"no reply within 0\.05 s"):
        await provider.complete(request_)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_refused_key_stops_the_run_naming_the_variable(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    provider, _ = make(vendor, status(401, vendor.error(401)))
    with pytest.raises(ModelRejected, match=f"\\${KEY_ENV} was refused"):
        await provider.complete(request_)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_missing_key_stops_the_run_before_any_request(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    provider, recorder = make(vendor, lambda r: vendor.reply("{}"))
    with pytest.raises(ModelRejected, match=f"\\${KEY_ENV} is not set"):
        await provider.complete(request_)
    assert recorder.requests == []


# ── what goes over the wire ──────────────────────────────────────────────────────────────────────


async def test_anthropic_request_sends_the_menu_as_output_format_without_tools(
    make: MakeProvider, request_: ModelRequest
) -> None:
    provider, recorder = make(ANTHROPIC, lambda r: ANTHROPIC.reply("{}"), max_tokens=900)
    await provider.complete(request_)
    body = recorder.body()
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": anthropic.transform_schema(request_.schema)}
    }
    assert "tools" not in body and "tool_choice" not in body
    assert [b["text"] for b in body["system"]] == [request_.system]
    assert body["messages"] == [{"role": "user", "content": request_.prompt}]
    assert (body["model"], body["max_tokens"]) == ("test-model", 900)
    assert str(recorder.requests[0].url) == "https://api.anthropic.com/v1/messages"


async def test_openai_request_sends_the_menu_as_strict_response_format_without_tools(
    make: MakeProvider, request_: ModelRequest
) -> None:
    provider, recorder = make(OPENAI, lambda r: OPENAI.reply("{}"), max_tokens=900)
    await provider.complete(request_)
    body = recorder.body()
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "decision",
            "schema": strict_schema(request_.schema),
            "strict": True,
        },
    }
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"] == [
        {"role": "system", "content": request_.system},
        {"role": "user", "content": request_.prompt},
    ]
    assert body["max_completion_tokens"] == 900 and "max_tokens" not in body
    assert str(recorder.requests[0].url) == "https://api.openai.com/v1/chat/completions"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_summary_request_sends_the_summary_schema(
    vendor: Vendor, make: MakeProvider, request_: ModelRequest
) -> None:
    summarize = dataclasses.replace(request_, purpose="summarize", schema=SUMMARY_SCHEMA)
    provider, recorder = make(vendor, lambda r: vendor.reply('{"summary": "restarted web"}'))
    reply = await provider.complete(summarize)
    assert json.loads(reply.text) == {"summary": "restarted web"}
    body = recorder.body()
    if vendor is ANTHROPIC:
        assert body["output_config"]["format"]["schema"]["properties"] == {
            "summary": {"type": "string"}
        }
    else:
        assert body["response_format"]["json_schema"]["name"] == "summary"
        assert body["response_format"]["json_schema"]["schema"] == SUMMARY_SCHEMA


async def test_openai_local_server_needs_no_key_and_gets_max_tokens(
    make: MakeProvider, request_: ModelRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    provider, recorder = make(
        OPENAI,
        lambda r: OPENAI.reply(json.dumps(RESTART)),
        api_key_env=None,
        base_url="http://127.0.0.1:8000/v1",
    )
    await provider.complete(request_)
    sent = recorder.requests[0]
    assert str(sent.url) == "http://127.0.0.1:8000/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer local"
    assert recorder.body()["max_tokens"] == 1024 and "max_completion_tokens" not in recorder.body()


# ── OpenAI strict mode ───────────────────────────────────────────────────────────────────────────


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def assert_strict(schema: dict[str, Any]) -> None:
    """The rules OpenAI's strict mode enforces on a response-format schema."""
    assert schema["type"] == "object" and "anyOf" not in schema  # the root is a plain object
    for node in walk(schema):
        assert "oneOf" not in node and "allOf" not in node, node
        assert "default" not in node and "const" not in node, node
        if "$ref" in node:
            assert set(node) == {"$ref"}, f"$ref with siblings: {node}"
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, node
            assert node["required"] == list(node["properties"]), node


def test_strict_schema_of_the_menu_satisfies_strict_mode(menu: Menu) -> None:
    schema = strict_schema(menu.schema())
    assert_strict(schema)
    # told apart by first key (sleep's two variants each start with it too)
    members = [v for m in schema["$defs"].values() for v in m.get("anyOf", [m])]
    assert all(next(iter(m["properties"])) == "kind" for m in members)


def test_strict_schema_turns_a_discriminated_union_into_any_of() -> None:
    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int = 9

    class Dog(BaseModel):
        kind: Literal["dog"]

    class Pet(BaseModel):
        pet: Union[Cat, Dog] = Field(discriminator="kind")  # noqa: UP007  # the oneOf case

    raw = Pet.model_json_schema()
    assert any("oneOf" in n for n in walk(raw))
    schema = strict_schema(raw)
    assert_strict(schema)
    assert [m["$ref"] for m in schema["properties"]["pet"]["anyOf"]] == [
        "#/$defs/Cat",
        "#/$defs/Dog",
    ]


def test_strict_schema_keeps_limits_as_hints_and_leaves_the_input_alone(menu: Menu) -> None:
    raw = menu.schema()
    before = copy.deepcopy(raw)
    schema = strict_schema(raw)
    assert raw == before
    summary = schema["$defs"]["Finish"]["properties"]["summary"]
    assert "maxLength: 4000" in summary["description"] and "maxLength" not in summary


def test_strict_shaped_replies_still_validate_with_the_menu(menu: Menu) -> None:
    """Strict mode makes the model fill every property (nulls for the optional ones)."""
    replies: list[dict[str, Any]] = [
        {"kind": "sleep", "seconds": 30, "until": None},
        {"kind": "page", "url": "http://127.0.0.1:9/page", "method": "POST", "body": None},
        {"kind": "wait_event", "event": "deploy", "match": {}, "timeout_s": None},
    ]
    for action in replies:
        decision = menu.parse(json.dumps({"reason": "strict", "action": action}))
        assert decision.action == action["kind"]


# ── secrets ──────────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[list[Any]]:
    """Every structlog event (debug included) and every stdlib record (the SDKs log there)."""
    caplog.set_level(logging.DEBUG)
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as events:
            yield events
    finally:
        structlog.configure(**saved)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_provider_never_puts_the_key_in_errors_or_logs(
    vendor: Vendor,
    make: MakeProvider,
    request_: ModelRequest,
    all_logs: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    echoed = {"error": {"type": "authentication_error", "message": f"bad key {KEY}"}}
    answers = [
        status(401, echoed),  # a server that echoes the key it was sent
        status(429, vendor.error(429), **{"retry-after": "7"}),
        read_timeout,
    ]
    errors: list[Exception] = []
    recorders = []
    for answer in answers:
        provider, recorder = make(vendor, answer)
        recorders.append(recorder)
        with pytest.raises((ModelError, ModelRejected)) as e:
            await provider.complete(request_)
        errors.append(e.value)
    for err in errors:
        assert KEY not in str(err) and KEY not in repr(err)
        assert err.__cause__ is None and err.__context__ is None  # no SDK exception attached
    assert "[redacted]" in str(errors[0])
    assert all_logs and KEY not in repr(all_logs)
    assert caplog.records and KEY not in caplog.text
    for recorder in recorders:
        for sent in recorder.requests:
            assert KEY in " ".join(sent.headers.get(h, "") for h in AUTH_HEADERS)
            others = [v for k, v in sent.headers.items() if k.lower() not in AUTH_HEADERS]
            assert KEY not in str(sent.url) and KEY not in " ".join(others)
            assert KEY.encode() not in sent.content


# ── the registry, the config and the helpers ──────────────────────────────────────────────────


def test_build_returns_each_network_provider(key: str) -> None:
    assert isinstance(build("a", ANTHROPIC.config()), AnthropicProvider)
    assert isinstance(build("o", OPENAI.config()), OpenAIProvider)


def test_config_openai_needs_a_key_or_a_local_server(tmp_path: Path) -> None:
    text = '[models.gpt]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\n'
    with pytest.raises(ConfigError, match="set api_key_env"):
        config.parse(text, tmp_path / "config.toml")
    local = config.parse(text + 'base_url = "http://127.0.0.1:8000/v1"\n', tmp_path / "c.toml")
    assert isinstance(local.models["gpt"], OpenAIModel)


def test_config_anthropic_names_its_key_variable(tmp_path: Path) -> None:
    text = '[models.claude]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-5"\n'
    with pytest.raises(ConfigError, match=r"models\.claude\.api_key_env: required key is missing"):
        config.parse(text, tmp_path / "config.toml")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "7"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: retry now
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_s_reads_seconds_milliseconds_and_dates(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after_s(headers) == expected


def test_model_reply_defaults_match_the_engine_vocabulary() -> None:
    assert ModelReply(text="", model="m").stop_reason == "end"
