"""`POST /hooks/NAME` on an in-process daemon (issue 29): each kind records what its sender
signed, once per delivery id, with its hook as the source; hostile input gets nothing — no or a
wrong signature (401), a stale timestamp (401), a replayed id (recorded once), a body over the
limit with and without Content-Length (413), a slow body (closed), malformed JSON (400 naming
it), a sender over its rate (429). Each would be recorded by a naive receiver."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.api.test_api_connections import closed_within, opened
from tests.conftest import Home
from tests.hooks.hooksupport import SECRETS, body, events, github, hooked, secrets, standard

__all__ = ["secrets"]  # the fixture, used by name
pytestmark = [pytest.mark.usefixtures("secrets"), pytest.mark.backends]


async def test_hooks_standard_webhooks_signed_by_the_reference_library_is_recorded_once(
    home: Home, serve: Any
) -> None:
    url = await hooked(home, serve)
    raw = body({"type": "deploy.finished", "service": "checkout"})
    headers = standard(raw, "msg_1")
    async with httpx.AsyncClient(base_url=url) as c:
        first = await c.post("/hooks/sw", content=raw, headers=headers)
        again = await c.post("/hooks/sw", content=raw, headers=headers)  # a replay
    assert first.status_code == 200 and first.json() == {"recorded": 1, "duplicates": 0}
    assert again.status_code == 200 and again.json() == {"recorded": 0, "duplicates": 1}
    (event,) = events(home)
    assert (event.name, event.source, event.dedupe_key) == (
        "deploy.finished",
        "hook:sw",
        "hook:sw:msg_1",
    )
    assert event.data == {"type": "deploy.finished", "service": "checkout"}


async def test_hooks_github_signed_as_github_documents_is_recorded_once(
    home: Home, serve: Any
) -> None:
    url = await hooked(home, serve)
    raw = body(
        {"ref": "refs/heads/main", "repository": {"full_name": "o/r"}, "sender": {"login": "u"}}
    )
    headers = github(raw, "push", "d-1")
    async with httpx.AsyncClient(base_url=url) as c:
        assert (await c.post("/hooks/gh", content=raw, headers=headers)).status_code == 200
        assert (await c.post("/hooks/gh", content=raw, headers=headers)).json()["duplicates"] == 1
    (event,) = events(home)
    assert (event.name, event.dedupe_key) == ("gh.push", "hook:gh:d-1")
    assert event.data["repository"] == "o/r" and event.data["sender"] == "u"


@pytest.mark.parametrize(
    "case",
    ["no signature", "wrong signature", "stale timestamp", "future timestamp", "other body"],
)
async def test_hooks_an_unproven_standard_webhook_is_401_and_records_nothing(
    home: Home, serve: Any, case: str
) -> None:
    url = await hooked(home, serve)
    raw = body({"type": "x"})
    headers = {
        "no signature": {"content-type": "application/json"},
        "wrong signature": {**standard(raw), "webhook-signature": "v1,AAAA"},
        "stale timestamp": standard(raw, at=datetime.now(UTC) - timedelta(minutes=10)),
        "future timestamp": standard(raw, at=datetime.now(UTC) + timedelta(minutes=10)),
        "other body": standard(body({"type": "y"})),
    }[case]
    async with httpx.AsyncClient(base_url=url) as c:
        reply = await c.post("/hooks/sw", content=raw, headers=headers)
    assert reply.status_code == 401 and reply.json() == {"error": "not authenticated"}
    assert events(home) == []


async def test_hooks_github_with_a_wrong_secret_is_401(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    raw = body({"zen": "x"})
    headers = {**github(raw), "X-Hub-Signature-256": "sha256=" + "0" * 64}
    async with httpx.AsyncClient(base_url=url) as c:
        assert (await c.post("/hooks/gh", content=raw, headers=headers)).status_code == 401
        assert (await c.post("/hooks/gh", content=raw)).status_code == 401
    assert events(home) == []


async def test_hooks_bearer_token_hook(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    async with httpx.AsyncClient(base_url=url) as c:
        none = await c.post("/hooks/tok", json={"v": 1})
        wrong = await c.post("/hooks/tok", json={"v": 1}, headers={"Authorization": "Bearer no"})
        right = await c.post(
            "/hooks/tok",
            json={"v": 1},
            headers={"Authorization": f"Bearer {SECRETS['HOOK_TOKEN']}"},
        )
    assert (none.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    (event,) = events(home)
    assert (event.name, event.source, event.data) == ("deploy", "hook:tok", {"v": 1})


async def test_hooks_malformed_json_is_400_naming_the_problem(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    raw = b'{"type": "x",'
    async with httpx.AsyncClient(base_url=url) as c:
        reply = await c.post("/hooks/sw", content=raw, headers=standard(raw))
        no_name = body({"other": 1})
        unnamed = await c.post("/hooks/sw", content=no_name, headers=standard(no_name))
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]
    assert unnamed.status_code == 400 and "'type'" in unnamed.json()["error"]
    assert events(home) == []


async def test_hooks_a_10_mb_body_is_413_with_and_without_content_length(
    home: Home, serve: Any
) -> None:
    url = await hooked(home, serve, timeout=60)
    port = int(url.rsplit(":", 1)[1])
    declared = await opened(port, (
        "POST /hooks/sw HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"
    ).encode())  # fmt: skip
    assert (await closed_within(declared, 5)).startswith(b"HTTP/1.1 413")

    async def chunks() -> Any:
        for _ in range(160):  # 10 MiB in 64 KiB chunks, no Content-Length
            yield b"x" * 65536

    async with httpx.AsyncClient(base_url=url) as c:
        try:
            status = (
                await c.post("/hooks/sw", content=chunks(), headers=standard(b""))
            ).status_code
        except httpx.TransportError:  # closed while we still sent: no answer read
            status = 413
    assert status == 413
    assert events(home) == []


async def test_hooks_a_slow_body_is_closed_at_the_request_deadline(home: Home, serve: Any) -> None:
    url = await hooked(home, serve, timeout=1)
    port = int(url.rsplit(":", 1)[1])
    raw = body({"type": "slow"})
    head = "".join(f"{k}: {v}\r\n" for k, v in standard(raw).items())
    slow = await opened(port, (
        f"POST /hooks/sw HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(raw)}\r\n\r\n"
    ).encode() + raw[:3])  # fmt: skip

    async def drip() -> None:
        for byte in raw[3:]:
            await asyncio.sleep(0.3)
            slow[1].write(bytes([byte]))

    dripping = asyncio.create_task(drip())
    assert await closed_within(slow, 10) == b""
    dripping.cancel()
    assert events(home) == []


async def test_hooks_a_sender_over_its_rate_gets_429(home: Home, serve: Any) -> None:
    url = await hooked(home, serve, rate=3)
    auth = {"Authorization": f"Bearer {SECRETS['HOOK_TOKEN']}"}
    async with httpx.AsyncClient(base_url=url, headers=auth) as c:
        codes = [(await c.post("/hooks/tok", json={"n": n})).status_code for n in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    assert len(events(home)) == 3


async def test_hooks_an_unknown_hook_is_404(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    async with httpx.AsyncClient(base_url=url) as c:
        assert (await c.post("/hooks/nope", json={})).status_code == 404
        assert (await c.get("/hooks/sw")).status_code == 405
