"""A GitHub webhook whose *Content type* is application/x-www-form-urlencoded (GitHub's default)
is read (review of issue 29): GitHub signs the body as sent, the JSON is its `payload` field.
The first version answered 400 "not JSON"; a form without that field is still a 400."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.conftest import Home
from tests.hooks.hooksupport import body, events, github, hooked, secrets

__all__ = ["secrets"]  # the fixture, used by name
pytestmark = pytest.mark.usefixtures("secrets")
FORM = "application/x-www-form-urlencoded"


async def test_hooks_a_form_encoded_github_delivery_is_recorded(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    payload = {"action": "opened", "repository": {"full_name": "o/r"}, "sender": {"login": "u"}}
    raw = urlencode({"payload": body(payload).decode()}).encode()
    nothing = urlencode({"other": "1"}).encode()
    async with httpx.AsyncClient(base_url=url) as c:
        sent = await c.post("/hooks/gh", content=raw,
                            headers={**github(raw, "issues", "d-1"), "content-type": FORM})  # fmt: skip
        bad = await c.post("/hooks/gh", content=nothing,
                           headers={**github(nothing, "issues", "d-2"), "content-type": FORM})  # fmt: skip
    assert sent.status_code == 200, sent.text
    assert bad.status_code == 400 and "payload" in bad.json()["error"]
    (event,) = events(home)
    assert event.name == "gh.issues"
    assert (event.data["action"], event.data["repository"], event.data["sender"]) == (
        "opened",
        "o/r",
        "u",
    )
