"""A page whose signed request is refused (its challenge void by then: agentd restarted between
`/prove` and the request, say) asks `/prove` once more before it gives up its session: only
`/prove` saying the session is over sends the browser to the login. Real Chromium."""

from __future__ import annotations

from typing import Any

from tests.configs import act
from tests.conftest import Home
from tests.web.test_web_browser import free_port, logged_in, waiting_on


async def test_web_browser_a_refused_signature_is_retried_not_logged_out(
    home: Home, serve: Any, browser: Any
) -> None:
    port = free_port()
    _, item = await waiting_on(home, serve, port, act("append", "x", word="w"), "a goal")
    base = f"http://127.0.0.1:{port}"
    context, page = await logged_in(browser, home, base)
    spoiled: list[str] = []

    async def void_first(route: Any) -> None:
        headers = dict(route.request.headers)
        if "x-agentd-auth" in headers and not spoiled:
            session, challenge, mac = headers["x-agentd-auth"].split(".")
            spoiled.append(challenge)  # as if agentd had restarted: the challenge is not its own
            headers["x-agentd-auth"] = f"{session}.{'A' * len(challenge)}.{mac}"
        await route.continue_(headers=headers)

    await page.route(f"{base}/items/*", void_first)
    await page.goto(f"{base}/items/{item.item_id}")
    await page.wait_for_selector("#approve-form")  # the second try opened it
    assert spoiled and page.url == f"{base}/items/{item.item_id}"
    await context.close()
