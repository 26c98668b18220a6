"""A token written in an action's URL never reaches the model: a real run whose model is an
OpenAI-compatible server on loopback (so every request is seen whole: system text, prompt and
schema) takes two http actions whose URLs carry a secret in the path and in the query, and no
request — nor the journal — holds either; the model sees each URL's label and host instead."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from agentd.config import load
from agentd.harness.menu import Menu
from tests.conftest import Home, ServeHttp, finished, wait_for

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

PATH_SECRET = "Xk9fQ2mZ7pLwR4tV8bN3cH6j"  # as a chat webhook's path holds one
QUERY_SECRET = "SECRETVALUE"
TABLE_SECRET = "a1B2c3D4e5F6g7H8i9J0kLmN"


def first_choice(node: Any) -> Any:
    """The first `url` value the schema offers (an enum or a const, wherever it sits)."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "url" in node["properties"]:
            url = node["properties"]["url"]
            return url["enum"][0] if "enum" in url else url["const"]
        for value in node.values():
            if (found := first_choice(value)) is not None:
                return found
    if isinstance(node, list):
        for value in node:
            if (found := first_choice(value)) is not None:
                return found
    return None


def only_action(schema: Any, kind: str) -> Any:
    """The schema of one action of the menu (its $defs entry whose `kind` is `kind`)."""
    for member in schema.get("$defs", {}).values():
        if member.get("properties", {}).get("kind", {}).get("enum") == [kind]:
            return member
    raise AssertionError(f"no action {kind} in the schema")


class FakeModel:
    """An OpenAI-compatible chat server: records each request body, and decides from the
    schema it is sent — `hook`, then `page` (each with the first URL label offered), then
    finish — so the run is the same whatever the labels look like."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"])).decode()
                outer.bodies.append(raw)
                body = json.dumps(outer.reply(json.loads(raw))).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        fmt = request["response_format"]["json_schema"]
        if fmt["name"] != "decision":
            content = json.dumps({"summary": "two requests sent"})
        else:
            decided = sum(
                '"name": "decision"' in b or '"name":"decision"' in b for b in self.bodies
            )
            schema = fmt["schema"]
            if decided <= 2:
                kind = "hook" if decided == 1 else "page"
                url = first_choice(only_action(schema, kind))
                action = {"kind": kind, "url": url, "method": "POST", "body": "ping"}
            else:
                action = {"kind": "finish", "outcome": "succeeded", "summary": "sent"}
            content = json.dumps({"reason": "send it", "action": action})
        message = {"role": "assistant", "content": content, "refusal": None}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1764450000,
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


class Receiver(BaseHTTPRequestHandler):
    """Where the actions post: records the path each request reached (secrets included)."""

    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).paths.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def config_text(model_url: str, receiver_url: str) -> str:
    return f"""
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "openai"
model = "fake"
base_url = "{model_url}/v1"

[actions.hook]
type = "http"
urls = ["{receiver_url}/hooks/{PATH_SECRET}?token={QUERY_SECRET}"]

[actions.page]
type = "http"
urls = {{ oncall = "{receiver_url}/services/{TABLE_SECRET}/x?sig={QUERY_SECRET}2" }}

[agents.default]
actions = ["hook", "page", "finish"]
"""


async def test_http_action_url_secrets_never_reach_the_model(
    home: Home, serve: Any, http_server: ServeHttp
) -> None:
    model = FakeModel()
    model_url = http_server(model.handler())
    receiver = type("R", (Receiver,), {"paths": []})
    receiver_url = http_server(receiver)
    home.write_config(config_text(model_url, receiver_url))
    run_id = home.start_run(home.add_goal())

    await serve()
    await wait_for(finished(home, run_id))

    # The actions ran, on their full URLs…
    assert home.run(run_id).status == "succeeded", home.steps(run_id)
    assert receiver.paths == [
        f"/hooks/{PATH_SECRET}?token={QUERY_SECRET}",
        f"/services/{TABLE_SECRET}/x?sig={QUERY_SECRET}2",
    ]
    # …and no model request held a secret, in the menu, the schema or the history.
    assert len(model.bodies) >= 3
    for body in model.bodies:
        for secret in (PATH_SECRET, QUERY_SECRET, TABLE_SECRET):
            assert secret not in body
    # The model saw each URL by its label and host.
    host = receiver_url.removeprefix("http://")
    system = json.loads(model.bodies[-1])["messages"][0]["content"]
    assert "oncall" in system and host in system
    # Nor does the journal hold them: the decisions and results name the labels.
    journal = json.dumps([(s.args, s.result, s.data) for s in home.steps(run_id)], default=str)
    assert PATH_SECRET not in journal and QUERY_SECRET not in journal
    assert TABLE_SECRET not in journal


def test_mcp_tool_menu_shows_the_server_by_host(home: Home) -> None:
    cfg = home.write_config(
        f"""
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.apply]
type = "mcp_tool"
url = "https://jobs.example/mcp/{PATH_SECRET}?key={QUERY_SECRET}"
tool = "apply"

[agents.default]
actions = ["apply", "finish"]
""",
        [],
    )
    menu = Menu(cfg, cfg.agents["default"])

    shown = json.dumps([menu.describe(), menu.schema()])

    assert "jobs.example" in shown
    assert PATH_SECRET not in shown and QUERY_SECRET not in shown
    assert load(home.paths.config).actions["apply"]  # the config itself is valid
