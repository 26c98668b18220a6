"""The web inbox in a real headless Chromium (Debian's, driven by Playwright): log in with the
token, approve with an edit, a second tab updated over SSE, a cross-site post refused with 403,
hostile model text inert. Screenshots of the inbox and the approval page go to test-artifacts/.
Skipped loudly (tests/browser_support.py) when Chromium or Playwright is missing."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from agentd.db import items as qi
from tests.conftest import Home, finished, wait_for, waiting

HOSTILE = "<script>window.pwned=1</script> \x1b[2J\x1b[31m"
CONFIG = """
[daemon]
poll_interval_s = 0.02

[api]
port = __PORT__

[web]
enabled = true

[models.default]
provider = "scripted"
replies = "replies.json"

[actions.append]
type = "command"
argv = ["sh", "-c", "echo {word} >> __OUT__"]
params = { word = { pattern = "^[a-z]+$" } }

[agents.default]
actions = ["append", "finish"]
policy = { rules = { append = "approve" } }
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_web_browser_approve_with_edit_and_live_update(
    home: Home, serve: Any, browser: Any, screenshots: Path, tmp_path: Path
) -> None:
    port = free_port()
    out = tmp_path / "out.txt"
    ask = {"reason": f"restart it {HOSTILE}", "action": {"kind": "append", "word": "gated"}}
    done = {"reason": "ok", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
    text = CONFIG.replace("__PORT__", str(port)).replace("__OUT__", str(out))
    home.write_config(text, [ask, done])
    run_id = home.start_run(home.add_goal(title=f"goal {HOSTILE}"))
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()

    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    assert page.url == f"{base}/"
    watcher = await context.new_page()  # the second tab: the inbox, following SSE
    await watcher.goto(f"{base}/")
    assert await watcher.locator(f"a[href='/items/{item.item_id}']").count() >= 1
    await page.screenshot(path=screenshots / "web-inbox.png", full_page=True)

    await page.goto(f"{base}/items/{item.item_id}")
    body = await page.inner_text("main")
    assert "<script>window.pwned=1</script>" in body  # shown as text
    assert "\\x1b[2J" in body  # ESC made visible
    assert await page.evaluate("window.pwned") is None  # and never run
    await page.screenshot(path=screenshots / "web-approval.png", full_page=True)

    await page.fill("input[name='arg.word']", "edited")
    await page.fill("#approve-form input[name='note']", "the real one")
    await page.click("#approve-form button")
    await page.wait_for_url(f"**/items/{item.item_id}?done=*")
    assert "approved item" in await page.inner_text("main")

    # The second tab hears of it over SSE and drops the item, without a reload by anyone.
    await watcher.wait_for_selector(f"a[href='/items/{item.item_id}']", state="detached")
    assert "Nothing open" in await watcher.inner_text("main")
    await wait_for(finished(home, run_id))
    assert out.read_text().split() == ["edited"]
    await context.close()


async def test_web_browser_cross_site_post_is_refused(home: Home, serve: Any, browser: Any) -> None:
    port = free_port()
    text = CONFIG.replace("__PORT__", str(port)).replace("__OUT__", "/dev/null")
    home.write_config(text, [{"reason": "-", "action": {"kind": "finish", "outcome": "succeeded"}}])
    await serve()
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    # A page on another site posts a form to the inbox (served by Playwright: no network).
    attack = (
        f"<form id=f method=post action='{base}/items/1/approve'>"
        "<input name=note value=x></form><script>f.submit()</script>"
    )

    async def evil(route: Any) -> None:
        await route.fulfill(status=200, content_type="text/html", body=attack)

    await context.route("http://attacker.test/**", evil)
    async with page.expect_response(f"{base}/items/1/approve") as posted:
        await page.goto("http://attacker.test/")
    response = await posted.value
    assert response.status == 403
    assert "cross-site request refused" in await response.text()
    await context.close()
