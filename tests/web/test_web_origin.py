"""The web session is bound to agentd's origin, in a real headless Chromium: a server on another
127.0.0.1 port (every local dev server) receives whatever the browser sends it, and replaying
that against agentd from outside the browser neither approves nor reads a page, while the
operator's own page still approves. Logging out ends the session for good: what the browser held
before it opens nothing afterwards. Skipped loudly when Chromium or Playwright is missing."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from agentd.db import items as qi
from agentd.models import InboxStatus
from agentd.operator import sessions
from tests.configs import act
from tests.conftest import Home, ServeHttp, finished, wait_for
from tests.web.test_web_browser import free_port, logged_in, waiting_on

# Headers a replaying server would not copy: they describe its own connection.
HOP = frozenset({"host", "content-length", "connection", "accept-encoding"})


def collector(seen: list[dict[str, str]]) -> type[BaseHTTPRequestHandler]:
    """Another program's web server on a loopback port: its page makes one request to it, and
    it keeps the headers of every request the browser sends it."""
    page = b"<!doctype html><p>a local dev server</p><img src='/pixel.gif'>"

    class Collector(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = page if self.path == "/" else b""
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if body else "image/gif")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Collector


async def test_web_browser_another_loopback_port_cannot_replay_the_session(
    home: Home, serve: Any, browser: Any, http_server: ServeHttp, tmp_path: Path
) -> None:
    port = free_port()
    out = tmp_path / "out.txt"
    run_id, item = await waiting_on(
        home, serve, port, act("append", "x", word="approved"), "a goal", out=out
    )
    base = f"http://127.0.0.1:{port}"
    seen: list[dict[str, str]] = []
    evil = http_server(collector(seen))
    context, page = await logged_in(browser, home, base)
    await page.wait_for_selector("main")
    await page.goto(f"{evil}/")
    await wait_for(lambda: len(seen) >= 2)  # the page and the one request it made

    # The other server replays what it was sent, from outside the browser (it may forge any
    # header: Origin, Sec-Fetch-Site), to approve the item and to read its page.
    async with httpx.AsyncClient(base_url=base) as c:
        for sent in seen:
            replay = {k: v for k, v in sent.items() if k not in HOP}
            approve = await c.post(f"/items/{item.item_id}/approve", headers=replay)
            assert approve.status_code in (401, 403) or (
                approve.status_code == 303 and approve.headers["location"].startswith("/login")
            ), (approve.status_code, approve.headers.get("location"))
            shown = await c.get(f"/items/{item.item_id}", headers=replay)
            assert shown.status_code in (401, 403, 303), shown.status_code
            assert "Approve as proposed" not in shown.text and "append" not in shown.text
            events = await c.get("/events", headers=replay, timeout=2)
            assert events.status_code == 401
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).status == InboxStatus.OPEN
    assert not out.exists()

    # The operator's own page still approves.
    await page.goto(f"{base}/items/{item.item_id}")
    await page.click("#approve-form button")
    await page.wait_for_selector(".flash")
    assert "as proposed" in await page.inner_text("main")
    await wait_for(finished(home, run_id))
    assert out.read_text().split() == ["approved"]
    await context.close()


async def test_web_browser_logout_ends_the_session_the_browser_held(
    home: Home, serve: Any, browser: Any
) -> None:
    """Log out ends the session at agentd, not only in the browser (whose key no script can read
    out, so a copy of its storage carries none); what the browser held, put back into a fresh
    browser afterwards, opens nothing: the login asks again."""
    port = free_port()
    _, item = await waiting_on(home, serve, port, act("append", "x", word="late"), "a goal")
    base = f"http://127.0.0.1:{port}"
    context, page = await logged_in(browser, home, base)
    await page.goto(f"{base}/items/{item.item_id}")
    await page.wait_for_selector("#approve-form")
    held = await context.storage_state()
    token = home.paths.api_token.read_text().strip()
    assert len(sessions.live(home.store, token)) == 1
    await page.click("nav button")  # Log out
    await page.wait_for_url(f"{base}/login?*")
    assert "Logged out." in await page.inner_text("main")
    assert sessions.live(home.store, token) == []
    await context.close()

    again = await browser.new_context(storage_state=held)
    page = await again.new_page()
    await page.goto(f"{base}/items/{item.item_id}")
    await page.wait_for_url(f"{base}/login?next=*")
    assert await page.locator("#approve-form").count() == 0
    await again.close()


async def test_web_browser_a_new_login_in_the_same_browser_ends_the_old_session(
    home: Home, serve: Any, browser: Any
) -> None:
    port = free_port()
    await waiting_on(home, serve, port, act("append", "x", word="twice"), "a goal")
    base = f"http://127.0.0.1:{port}"
    context, page = await logged_in(browser, home, base)
    token = home.paths.api_token.read_text().strip()
    await page.goto(f"{base}/login?token={token}")  # the URL of `agentd web`, opened again
    # The old session is signed out (after agentd proved itself), then the inbox opens.
    await page.wait_for_url(f"{base}/")
    await page.wait_for_selector("main")
    await wait_for(lambda: len(sessions.live(home.store, token)) == 1)
    await page.reload()
    await page.wait_for_selector("main")
    assert page.url == f"{base}/"  # still logged in, with the new session
    await context.close()


async def test_web_browser_login_and_inbox_at_phone_and_desk_width(
    home: Home, serve: Any, browser: Any, screenshots: Path
) -> None:
    """What the operator sees: the login and the inbox on a phone (390 px) and a desk (1280 px),
    kept as PNGs in test-artifacts/; neither page is wider than the screen."""
    port = free_port()
    reply = act("append", "restart the checkout service", word="phone")
    await waiting_on(home, serve, port, reply, "keep checkout healthy")
    base = f"http://127.0.0.1:{port}"
    for name, width in (("phone", 390), ("desk", 1280)):
        context = await browser.new_context(viewport={"width": width, "height": 800})
        page = await context.new_page()
        await page.goto(f"{base}/")
        await page.wait_for_url(f"{base}/login")  # no key in this browser: the login
        await page.screenshot(path=screenshots / f"web-login-{name}.png", full_page=True)
        token = home.paths.api_token.read_text().strip()
        await page.fill("input[name=token]", token)
        await page.click("form button")
        await page.wait_for_url(f"{base}/")
        await page.wait_for_selector("main #waiting")
        await page.screenshot(path=screenshots / f"web-inbox-{name}.png", full_page=True)
        assert await page.evaluate("document.documentElement.scrollWidth") <= width
        await context.close()
