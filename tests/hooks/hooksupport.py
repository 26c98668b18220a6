"""Shared by the hook tests: a home whose `[api] port` serves four hooks, and senders that sign
as each sender does (the Standard Webhooks reference library; GitHub as its docs say)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from agentd.db import items as qi
from tests.api.test_api import FINISH
from tests.conftest import Home, closed_port

SECRETS = {
    "HOOK_AM_TOKEN": "am-token-0123456789",
    "HOOK_GH_SECRET": "gh-secret-0123456789",
    "HOOK_SW_SECRET": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "HOOK_TOKEN": "json-token-0123456789",
}
CONFIG = """
[daemon]
poll_interval_s = 0.02

[api]
port = {port}
request_timeout_s = {timeout}

[hooks.am]
type = "alertmanager"
token_env = "HOOK_AM_TOKEN"

[hooks.gh]
type = "github"
secret_env = "HOOK_GH_SECRET"

[hooks.sw]
type = "json"
secret_env = "HOOK_SW_SECRET"
event_field = "type"

[hooks.tok]
type = "json"
token_env = "HOOK_TOKEN"
event = "deploy"
rate_per_minute = {rate}

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


async def hooked(home: Home, serve: Any, *, timeout: float = 5.0, rate: int = 600) -> str:
    """The base URL of an in-process daemon serving the four hooks."""
    port = closed_port()
    home.write_config(CONFIG.format(port=port, timeout=timeout, rate=rate), [FINISH])
    await serve()
    return f"http://127.0.0.1:{port}"


def standard(body: bytes, msg_id: str | None = None, at: datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers, signed by the reference library."""
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    at = at or datetime.now(UTC)
    signature = Webhook(SECRETS["HOOK_SW_SECRET"]).sign(msg_id, at, body)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }


def github(body: bytes, event: str = "push", delivery: str | None = None) -> dict[str, str]:
    """Headers as GitHub sends them: the HMAC-SHA256 of the body, hex, keyed by the secret."""
    mac = hmac.new(SECRETS["HOOK_GH_SECRET"].encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={mac}",
        "content-type": "application/json",
    }


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def events(home: Home) -> list[Any]:
    return home.store.read(lambda c: qi.list_events(c, 100_000))
