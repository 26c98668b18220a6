"""The web inbox in a real headless Chromium (Debian's, driven by Playwright): log in with the
token, approve as proposed (a multi-line text bound exactly, the form untouched), approve with an
edit, a second tab updated over SSE, a cross-site post refused with 403, a page on another
127.0.0.1 port that frames an item blocked, a link from another site opening the item, hostile
model text inert. Screenshots of the inbox and the approval page go to test-artifacts/
(docs/web-inbox.png is one of them). The session's binding to agentd's origin is in
test_web_origin.py. Skipped loudly (tests/browser_support.py) when Chromium or Playwright is
missing."""

from __future__ import annotations

import asyncio
import socket
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from agentd.operator import inbox
from tests.configs import FINISH, act, append_action, scripted_home, web_on
from tests.conftest import Home, ServeHttp, finished, wait_for, waiting

HOSTILE = "<script>window.pwned=1</script> \x1b[2J\x1b[31m"
HELLO = "retry: 2000\nevent: hello\ndata: 1\n\n"  # how the daemon starts every /events stream


def pages_home(port: int, out: Path | str = "/dev/null") -> str:
    """The home of these tests: the pages on at `port`; `append` (gated, as `notify` is) appends
    its word to `out`."""
    return scripted_home(
        ["append", "notify", "finish"],
        rules='append = "approve", notify = "approve"',
        tables=web_on(port) + append_action(Path(out), keyed=False),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_web_browser_approve_with_edit_and_live_update(
    home: Home, serve: Any, browser: Any, screenshots: Path, tmp_path: Path
) -> None:
    port = free_port()
    out = tmp_path / "out.txt"
    ask = act("append", f"restart it {HOSTILE}", word="gated")
    home.write_config(pages_home(port, out), [ask, FINISH])
    run_id = home.start_run(home.add_goal(title=f"goal {HOSTILE}"))
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()

    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    await page.wait_for_url(f"{base}/")  # the token left the address bar
    await page.wait_for_selector("main")
    watcher = await context.new_page()  # the second tab: the inbox, following SSE
    await watcher.goto(f"{base}/")
    await watcher.wait_for_selector(f"a[href='/items/{item.item_id}']")
    await page.screenshot(path=screenshots / "web-inbox.png", full_page=True)

    await page.goto(f"{base}/items/{item.item_id}")
    body = await page.inner_text("main")
    assert "<script>window.pwned=1</script>" in body  # shown as text
    assert "\\x1b[2J" in body  # ESC made visible
    assert await page.evaluate("window.pwned") is None  # and never run
    await page.screenshot(path=screenshots / "web-approval.png", full_page=True)

    await page.click("#edit summary")  # the edit form opens on demand
    await page.fill("textarea[name='arg.word']", "edited")
    await page.fill("#edit-form input[name='note']", "the real one")
    await page.click("#edit-form button")
    await page.wait_for_url(f"**/items/{item.item_id}?note=*")
    await page.wait_for_selector(".flash")
    assert "with your edits" in await page.inner_text("main")

    # The second tab hears of it over SSE and drops the item, without a reload by anyone.
    await watcher.wait_for_selector(f"a[href='/items/{item.item_id}']", state="detached")
    # And says what to do: nothing, or the notice of the run, which may have finished by now.
    shown = await watcher.inner_text("main")
    assert "Nothing needs you" in shown or "run 1 succeeded" in shown, shown
    await watcher.screenshot(path=screenshots / "web-inbox-empty.png", full_page=True)
    await wait_for(finished(home, run_id))
    assert out.read_text().split() == ["edited"]
    await context.close()


async def test_web_browser_page_catches_a_change_made_before_its_events_connect(
    home: Home, serve: Any, browser: Any
) -> None:
    """A change between a page's load and its /events connection is not missed: the page loads
    again on the stream's `hello`. The test answers the page's /events itself, after a notice
    was dismissed behind the page's back (the CLI's code path), with the hello every stream
    starts with and nothing else: no `change` event ever comes, so only the hello can make the
    page look again. (With the daemon's own stream some later commit makes it look within a few
    seconds: the rare flake of the test above, not a test.)"""
    port = free_port()
    home.write_config(pages_home(port), [FINISH])
    await serve()
    item_id = home.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="disk 91% full"))
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()
    context = await browser.new_context()
    asked, gate = asyncio.Event(), asyncio.Event()

    async def hello_only(route: Any) -> None:
        asked.set()
        await gate.wait()
        await route.fulfill(status=200, content_type="text/event-stream", body=HELLO)

    await context.route("**/events", hello_only)
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    await page.wait_for_url(f"{base}/")
    await page.wait_for_selector(f"#item-{item_id}")  # loaded: the notice is there
    await asyncio.wait_for(asked.wait(), 10)  # and its events are asked for, not yet answered
    inbox.dismiss(home.store, item_id)
    gate.set()
    await page.wait_for_selector(f"#item-{item_id}", state="detached", timeout=10_000)
    assert "Nothing needs you" in await page.inner_text("main")
    await context.close()


async def test_web_browser_cross_site_post_is_refused(home: Home, serve: Any, browser: Any) -> None:
    port = free_port()
    home.write_config(pages_home(port), [act("finish", "-", outcome="succeeded")])
    await serve()
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    await page.wait_for_selector("main")
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


async def waiting_on(
    home: Home, serve: Any, port: int, reply: dict[str, Any], title: str, out: Path | None = None
) -> Any:
    """A daemon serving the pages on `port`, its run waiting on the approval of `reply`
    (`append` appends to `out`)."""
    home.write_config(pages_home(port, out or "/dev/null"), [reply, FINISH])
    run_id = home.start_run(home.add_goal(title=title))
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return run_id, item


async def logged_in(browser: Any, home: Home, base: str) -> tuple[Any, Any]:
    context = await browser.new_context(viewport={"width": 1000, "height": 760})
    page = await context.new_page()
    token = home.paths.api_token.read_text().strip()
    await page.goto(f"{base}/login?token={token}")
    await page.wait_for_url(f"{base}/")  # the token left the address bar
    await page.wait_for_selector("main")  # the inbox, fetched with the session's key
    return context, page


MESSAGE = (
    "Checkout p95 latency is 2.4 s since 14:05 (target 0.8 s).\n"
    "The 14:02 deploy (v2.31.0) is the only change in the window.\n\n"
    "  Proposed next step: roll back to v2.30.4."
)


async def test_web_browser_approve_as_proposed_binds_the_exact_text(
    home: Home, serve: Any, browser: Any, screenshots: Path
) -> None:
    port = free_port()
    reply = act("notify", "tell the on-call", message=MESSAGE)
    run_id, item = await waiting_on(home, serve, port, reply, "keep checkout healthy")
    base = f"http://127.0.0.1:{port}"
    context, page = await logged_in(browser, home, base)
    await page.goto(f"{base}/items/{item.item_id}")
    await page.wait_for_selector("#approve-form")
    await page.screenshot(path=screenshots / "web-item.png", full_page=True)  # docs/web-inbox.png
    await page.click("#approve-form button")  # nothing touched
    await page.wait_for_url(f"**/items/{item.item_id}?note=*")
    await page.wait_for_selector(".flash")
    assert "as proposed" in await page.inner_text("main")  # not "with your edits"
    await wait_for(finished(home, run_id))
    done = home.store.read(lambda c: qi.get_item(c, item.item_id))
    assert done.status == InboxStatus.CONSUMED
    assert done.args == {"message": MESSAGE} and done.digest == item.digest
    await context.close()


async def test_web_browser_untouched_edit_form_binds_the_exact_text(
    home: Home, serve: Any, browser: Any, screenshots: Path
) -> None:
    port = free_port()
    message = "\n" + MESSAGE + "\n"  # a leading newline is the one a textarea loses most easily
    reply = act("notify", "tell the on-call", message=message)
    run_id, item = await waiting_on(home, serve, port, reply, "keep checkout healthy")
    base = f"http://127.0.0.1:{port}"
    context, page = await logged_in(browser, home, base)
    await page.goto(f"{base}/items/{item.item_id}")
    await page.click("#edit summary")
    assert await page.input_value("textarea[name='arg.message']") == message
    await page.locator("#edit").screenshot(path=screenshots / "web-edit.png")
    await page.click("#edit-form button")  # opened, not changed
    await page.wait_for_selector(".flash")
    assert "as proposed" in await page.inner_text("main")  # not "with your edits"
    await wait_for(finished(home, run_id))
    done = home.store.read(lambda c: qi.get_item(c, item.item_id))
    assert done.args == {"message": message} and done.digest == item.digest
    await context.close()


def page_handler(html_text: str) -> type[BaseHTTPRequestHandler]:
    """A handler serving one HTML page: another site's page (a framer, a mail with a link)."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html_text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Page


async def test_web_browser_a_page_framing_an_item_is_blocked(
    home: Home, serve: Any, browser: Any, http_server: ServeHttp
) -> None:
    port = free_port()
    reply = act("append", "x", word="framed")
    _, item = await waiting_on(home, serve, port, reply, "a goal")
    base = f"http://127.0.0.1:{port}"
    # Another 127.0.0.1 port is the same site: had the page script in its frame, it would be
    # this origin's (and hold the key); the headers keep it out of every frame.
    framing = f"<iframe id=f src='{base}/items/{item.item_id}' width=800 height=600></iframe>"

    evil = http_server(page_handler(framing))
    context, page = await logged_in(browser, home, base)
    assert await page.locator("#approve-form").count() == 0  # the inbox, logged in
    await page.goto(f"{base}/items/{item.item_id}")
    await page.wait_for_selector("#approve-form")  # served to the top level
    # The frame's navigation, not a fetch the item page's script may still make of the same URL.
    url = f"{base}/items/{item.item_id}"
    document = lambda r: r.url == url and r.request.resource_type == "document"  # noqa: E731
    async with page.expect_response(document) as framed:
        await page.goto(f"{evil}/")
    response = await framed.value
    assert response.status == 401  # the shell: only the headers keep it out of the frame
    await page.wait_for_load_state("load")
    (frame,) = [f for f in page.frames if f != page.main_frame]
    assert not frame.url.startswith(base)  # Chromium put its error page in the frame's place
    assert await frame.locator("#approve-form").count() == 0
    await context.close()


async def test_web_browser_a_link_from_another_site_opens_the_item_when_logged_in(
    home: Home, serve: Any, browser: Any, http_server: ServeHttp
) -> None:
    """A notification's link clicked in a mail or the ntfy app comes from another site: the
    shell it gets finds the key in this origin's storage and opens the item, instead of
    showing the login to someone logged in."""
    port = free_port()
    reply = act("append", "x", word="linked")
    _, item = await waiting_on(home, serve, port, reply, "a goal")
    base = f"http://127.0.0.1:{port}"
    link = f"<a id=go href='{base}/items/{item.item_id}'>approve append?</a>"

    mail = http_server(page_handler(link)).replace(
        "127.0.0.1", "localhost"
    )  # another site than 127.0.0.1
    context, page = await logged_in(browser, home, base)
    await page.goto(f"{mail}/")
    await page.click("#go")
    await page.wait_for_selector("#approve-form", timeout=5000)
    assert page.url == f"{base}/items/{item.item_id}"  # the item, not the login
    await page.goto(f"{base}/inbox/{item.item_id}")  # the link of an older notification
    await page.wait_for_url(f"{base}/items/{item.item_id}")
    await page.wait_for_selector("#approve-form")
    await context.close()
    # Not logged in: the same click ends at the login, which comes back to the item.
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{mail}/")
    await page.click("#go")
    await page.wait_for_url(f"{base}/login?next=%2Fitems%2F{item.item_id}")
    await context.close()
