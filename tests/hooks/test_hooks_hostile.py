"""`POST /hooks/NAME` against what a hostile sender tries beyond the issue's list (review of
issue 29): a `webhook-timestamp` that is not ASCII digits or is thousands of digits long, a body
nested a megabyte deep, a field a megabyte long quoted back in the refusal, strangers spending
the real sender's rate. Each got a 500 with a traceback, an unbounded log line or a 429 for the
real sender on the first version; now each is refused as stated and nothing is recorded."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from tests.api.test_api_connections import closed_within, opened
from tests.conftest import Home
from tests.hooks.hooksupport import SECRETS, body, events, hooked, secrets, standard

__all__ = ["secrets"]  # the fixture, used by name
pytestmark = [pytest.mark.usefixtures("secrets"), pytest.mark.backends]
AM = {"Authorization": f"Bearer {SECRETS['HOOK_AM_TOKEN']}"}


def api_auth(home: Home) -> dict[str, str]:
    return {"Authorization": f"Bearer {(home.root / 'api.token').read_text().strip()}"}


@pytest.mark.parametrize("stamp", [b"\xb2", b"9" * 5000, b"\xd9\xa1"])
async def test_hooks_a_timestamp_that_is_not_unix_seconds_is_401(
    home: Home, serve: Any, stamp: bytes
) -> None:
    url = await hooked(home, serve)
    raw = body({"type": "x"})
    headers: dict[str, Any] = {**standard(raw), "webhook-timestamp": stamp}
    async with httpx.AsyncClient(base_url=url) as c:
        reply = await c.post("/hooks/sw", content=raw, headers=headers)
    assert reply.status_code == 401
    assert events(home) == []


@pytest.mark.parametrize("hook", ["sw", "am"])
async def test_hooks_a_body_nested_deep_is_400_naming_it(home: Home, serve: Any, hook: str) -> None:
    url = await hooked(home, serve)
    deep = b"[" * 200_000 + b"]" * 200_000
    nested = b'{"type": "x", "alerts": [], "a": ' + b"[" * 40 + b"]" * 40 + b"}"
    async with httpx.AsyncClient(base_url=url) as c:
        for raw in (deep, nested):
            headers = standard(raw) if hook == "sw" else AM
            reply = await c.post(f"/hooks/{hook}", content=raw, headers=headers)
            assert reply.status_code == 400, reply.text
            assert "nests deeper than" in reply.json()["error"]
    assert events(home) == []


async def test_hooks_a_refusal_quotes_a_sender_boundedly(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    big = "x" * 900_000
    notes = [{"version": big, "alerts": []}, {"alerts": [{"status": big}]}]
    with capture_logs() as logs:
        async with httpx.AsyncClient(base_url=url) as c:
            for note in notes:
                reply = await c.post("/hooks/am", content=body(note), headers=AM)
                assert reply.status_code == 400 and len(reply.content) < 1000
    refused = [e for e in logs if e["event"] == "hook.refused"]
    assert len(refused) == 2
    assert all(len(str(e)) < 1000 for e in refused)
    assert events(home) == []


async def test_hooks_strangers_do_not_spend_the_senders_rate(home: Home, serve: Any) -> None:
    url = await hooked(home, serve, rate=3)
    good = {"Authorization": f"Bearer {SECRETS['HOOK_TOKEN']}"}
    bad = {"Authorization": "Bearer not-the-token"}
    async with httpx.AsyncClient(base_url=url) as c:
        strangers = [
            (await c.post("/hooks/tok", json={}, headers=bad)).status_code for _ in range(5)
        ]
        sender = [
            (await c.post("/hooks/tok", json={"n": n}, headers=good)).status_code for n in range(4)
        ]
    assert strangers == [401] * 5
    assert sender == [200, 200, 200, 429]  # the rate still holds for the sender itself
    assert len(events(home)) == 3


def test_hooks_timestamp_check_reads_ascii_digits_only() -> None:
    from agentd.hooks import verify

    for stamp in ("\xb2", "1" * 13, " 1", "-1"):
        with pytest.raises(verify.Unverified):
            verify.standard(
                {"webhook-id": "m", "webhook-timestamp": stamp, "webhook-signature": "v1,x"},
                b"", "s", time.time(), 300,
            )  # fmt: skip


async def test_hooks_a_flood_of_refusals_is_not_a_flood_of_log_lines(
    home: Home, serve: Any
) -> None:
    """Identical lines were already held back (agentd/log.py's Throttle, bypassed here); a
    stranger varying what the reason quotes (its declared Content-Length) was not."""
    url = await hooked(home, serve)
    port = int(url.rsplit(":", 1)[1])
    with capture_logs() as logs:
        for n in range(60):
            stream = await opened(port, (
                "POST /hooks/sw HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Length: {2_000_000 + n}\r\n\r\n"
            ).encode())  # fmt: skip
            assert (await closed_within(stream, 10)).startswith(b"HTTP/1.1 413")
        async with httpx.AsyncClient(base_url=url) as c:
            seen = (await c.get("/api/hooks", headers=api_auth(home))).json()["hooks"]["sw"]
    lines = [e for e in logs if e["event"] == "hook.refused"]
    assert len(lines) == 20  # the rest counted, not logged
    assert seen["refused"] == 60


async def test_hooks_an_alertmanager_notification_of_many_alerts_records_500(
    home: Home, serve: Any
) -> None:
    """Alertmanager's max_alerts is 0 (all) unless set: a 4xx for a big group would make it send
    the group again and again, every alert lost. The first 500 are recorded, the rest said."""
    url = await hooked(home, serve)
    alerts = [
        {"status": "firing", "labels": {"alertname": "Down", "instance": f"h{n}"},
         "startsAt": "2026-12-07T03:00:00Z", "fingerprint": f"f{n}"}
        for n in range(700)
    ]  # fmt: skip
    note = body({"version": "4", "alerts": alerts})
    async with httpx.AsyncClient(base_url=url) as c:
        reply = await c.post("/hooks/am", content=note, headers=AM)
        again = await c.post("/hooks/am", content=note, headers=AM)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"recorded": 500, "duplicates": 0, "left_out": 200}
    assert again.json() == {"recorded": 0, "duplicates": 500, "left_out": 200}
    assert len(events(home)) == 500


async def test_hooks_nan_and_infinity_are_not_json(home: Home, serve: Any) -> None:
    """Python reads NaN; PostgreSQL's jsonb refuses it, so the delivery was a 503 there, sent
    again forever (and on SQLite stored as text no JSON reader takes)."""
    url = await hooked(home, serve)
    async with httpx.AsyncClient(base_url=url) as c:
        for raw in (b'{"type": "x", "v": NaN}', b'{"type": "x", "v": -Infinity}'):
            reply = await c.post("/hooks/sw", content=raw, headers=standard(raw))
            assert reply.status_code == 400, reply.text
            assert "not a JSON value" in reply.json()["error"]
    assert events(home) == []
