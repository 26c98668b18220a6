"""The web inbox's pages as an on-call engineer sees them, in a real headless Chromium at 1280 and
390 px: one `agentd serve` process and one browser for the whole module. The approval comes from a
normal setup: an HTTP source on 127.0.0.1 (healthy, then answering 503), a 10-line log tail with
errors and a command source; the watch's run takes two actions, then proposes a restart that the
policy gates. Each page is checked where it matters — the decision and the failing source's
headline inside the first screen (bounding boxes), nothing wider than the screen — and kept as a
screenshot in the folder printed at the start (test-artifacts/, or $AGENTD_ARTIFACTS).
docs/img/approval-390.png and docs/img/inbox-1280.png are copies of two of them. Skipped loudly
without Chromium/Playwright."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.llm.runbook import VOCABULARY
from agentd.models import GoalStatus, InboxItem, InboxKind, InboxStatus, StepKind
from agentd.views import evidence as ev
from agentd.web import evidence_html
from tests import browser_support
from tests.web.signed import Signed
from tests.web.test_web import handed
from tests.web.test_web_browser import free_port

# One daemon and one browser for the module, its pages checked in order. Meant for one xdist
# worker, but the group is not kept under pytest 9.2 (see `granted`): each test stands on the
# fixture and on what the tests above it in this file leave, never on a test below.
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("web_pages")]
WIDTHS = {"desk": (1280, 800), "phone": (390, 844)}
BODY = b'{"status":"down","error":"db pool exhausted: 0 of 20 connections free"}'


HEALTHY_S = 1.5  # the service answers 200 this long after its first look, then 503
# The service's log as the agent tails it: ten lines, five with an error word.
LOG = "\n".join(
    f"2026-12-02T16:4{n // 2}:{n % 2 * 30:02d}Z "
    + ("ERROR db pool exhausted, request timed out" if n % 2 else f"INFO GET /cart 200 {n}ms")
    for n in range(10)
)


class Failing(BaseHTTPRequestHandler):
    """The checkout service: /health answers 200 for its first HEALTHY_S seconds (the watch sees
    it healthy), then 503 with a JSON error."""

    first: float | None = None

    def do_GET(self) -> None:
        now = time.monotonic()
        Failing.first = Failing.first or now
        healthy = now - Failing.first < HEALTHY_S
        body = b'{"status":"ok"}' if healthy else BODY
        self.send_response(200 if healthy else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def config_text(service: str, port: int) -> str:
    """A normal on-call setup: an HTTP check, the service's log tail, a command that says the
    deployed version; two actions the run may take alone, a restart it must ask for."""
    argv = json.dumps(["restart-service", "{service}"])  # home/bin/, on the daemon's PATH
    return f"""
[daemon]
poll_interval_s = 0.05

[api]
port = {port}

[web]
enabled = true

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.checkout]
type = "http"
url = "{service}/health"
timeout_s = 2.0

[sources.service_log]
type = "file_tail"
path = "checkout.log"
lines = 10

[sources.version]
type = "command"
argv = ["echo", "checkout v2.14.1 deployed 16:31"]

[actions.fetch_logs]
type = "command"
argv = ["echo", "fetched 200 lines"]

[actions.pool_stats]
type = "command"
argv = ["echo", "pool: 20 of 20 connections busy"]

[actions.restart]
type = "command"
argv = {argv}
params = {{ service = {{ pattern = "^[a-z-]+$" }} }}

[agents.oncall]
sources = ["checkout", "service_log", "version"]
actions = ["fetch_logs", "pool_stats", "restart", "finish"]
triggers = ["checkout.unhealthy"]
watch = {{ interval_s = 0.2 }}
policy = {{ rules = {{ restart = "approve" }}, expire = {{ approval = {{ after_s = 3600 }} }} }}

[agents.oncall.checkin]
every_s = 604800
min_s = 86400
"""


FETCH_LOGS = {"reason": "read the recent log", "action": {"kind": "fetch_logs"}}
POOL_STATS = {"reason": "see the db pool", "action": {"kind": "pool_stats"}}
RESTART = {
    "reason": "checkout /health answers 503 (db pool exhausted) since the last look; a restart "
    "frees the pool and is safe at this hour",
    "action": {"kind": "restart", "service": "checkout"},
}
FINISH = {
    "reason": "restarted",
    "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"},
}


@dataclass
class Site:
    base: str
    token: str
    store: SyncStore
    goal_id: int
    approval: InboxItem
    question_id: int
    out: Path


def _wait(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in time: {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def artifacts() -> Path:
    where = Path(os.environ.get("AGENTD_ARTIFACTS") or browser_support.ARTIFACTS)
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the web inbox: {where}")
    return where


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A home watching a failing service over HTTP, served by a real `agentd serve`, with an
    approval raised by the watch's run, a runbook question and notices beside it."""
    root = tmp_path_factory.mktemp("pages") / "home"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    port, out = free_port(), root / "restarted.txt"
    paths = config.Paths(root)
    paths.config.write_text(config_text(f"http://127.0.0.1:{httpd.server_address[1]}", port))
    script = root / "bin" / "restart-service"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "$1" >> {out}\n')
    script.chmod(0o755)
    (root / "replies.json").write_text(json.dumps([FETCH_LOGS, POOL_STATS, RESTART, FINISH]))
    (root / "checkout.log").write_text(LOG + "\n")
    store = SyncStore(paths.db)
    goal_id = store.write(lambda c: q.add_goal(c, title="Keep checkout up", why="revenue",
                                               agent="oncall", criteria=[], deadline=None))  # fmt: skip
    log = (root / "daemon.log").open("wb")
    env = {
        **os.environ,
        "AGENTD_LOG_FORMAT": "json",
        "PATH": f"{script.parent}:{os.environ['PATH']}",
    }
    proc = subprocess.Popen([sys.executable, "-m", "agentd", "--home", str(root), "serve"],
                            stdout=log, stderr=log, env=env, start_new_session=True)  # fmt: skip
    try:
        opened = lambda: store.read(lambda c: qi.list_items(c, status="open"))  # noqa: E731

        def raised() -> bool:
            assert proc.poll() is None, (root / "daemon.log").read_text()[-2000:]
            return any(i.kind == InboxKind.APPROVAL for i in opened())

        _wait(raised, "the approval")
        (approval,) = [i for i in opened() if i.kind == InboxKind.APPROVAL]
        question = (
            f"restart refused by policy, and health failing since 12:31. What now? {VOCABULARY}."
        )
        question_id = store.write(lambda c: qi.post(
            c, InboxKind.QUESTION, title=question, body=question, goal_id=goal_id, rule="ask"))  # fmt: skip
        for title in ("checkout latency back under 800 ms", "nightly backup took 41 min"):
            store.write(lambda c, t=title: qi.post(c, InboxKind.NOTICE, title=t, goal_id=goal_id))
        nudge = {"nudge": {"topic": "pool", "message": "raise the db pool to 40?"}}
        store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="raise the db pool to 40?",
                                      goal_id=goal_id, rule="nudge", data=nudge))  # fmt: skip
        token = paths.api_token.read_text().strip()
        yield Site(f"http://127.0.0.1:{port}", token, store, goal_id, approval, question_id, out)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
        log.close()
        httpd.shutdown()
        httpd.server_close()
        store.close()


@pytest.fixture(scope="module")
def pages(site: Site) -> Iterator[dict[str, Any]]:
    """One Chromium for the module; a logged-in tab at each width."""
    browser_support._skip_if_missing()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(**browser_support.launch_options())
        tabs = {}
        for name, (width, height) in WIDTHS.items():
            context = chromium.new_context(viewport={"width": width, "height": height})
            tab = context.new_page()
            tab.goto(f"{site.base}/login?token={site.token}")
            tab.wait_for_url(f"{site.base}/")
            tab.wait_for_selector("main")
            tabs[name] = tab
        yield tabs
        chromium.close()


def open_page(tab: Any, url: str, ready: str) -> None:
    tab.goto(url)
    tab.wait_for_selector(ready, state="visible")


def box_of(tab: Any, selector: str) -> dict[str, float]:
    """The bounding box of `selector`'s first element, once it is visible."""
    # A change the daemon reports re-renders <main> (live updates): wait for the element, and
    # read its box again if a re-render detached it in between.
    box = None
    for _ in range(3):
        tab.locator(selector).first.wait_for(state="visible")
        box = tab.locator(selector).first.bounding_box()
        if box is not None:
            break
    assert box is not None, f"{selector} is not shown"
    return box  # type: ignore[no-any-return]


def on_first_screen(tab: Any, selector: str) -> None:
    """`selector`'s element is visible without scrolling: inside the viewport, both ways."""
    box = box_of(tab, selector)
    size = tab.viewport_size
    assert box["y"] >= 0 and box["y"] + box["height"] <= size["height"], (selector, box, size)
    assert box["x"] >= 0 and box["x"] + box["width"] <= size["width"], (selector, box, size)


def fits(tab: Any) -> None:
    width = tab.viewport_size["width"]
    assert tab.evaluate("document.documentElement.scrollWidth") <= width


def shot(tab: Any, artifacts: Path, name: str) -> None:
    tab.screenshot(path=artifacts / f"{name}.png", full_page=True)


def test_web_pages_inbox_lists_what_waits_first(site: Site, pages: Any, artifacts: Path) -> None:
    for name, tab in pages.items():
        open_page(tab, f"{site.base}/", "#waiting")
        cards = tab.locator("main li")
        first = cards.nth(0).inner_text()
        assert "approve restart?" in first and "expires in" in first  # the soonest to expire
        assert "Keep checkout up" in first  # its goal's title
        assert "question" in cards.nth(1).inner_text().lower()
        assert box_of(tab, "#waiting")["y"] < box_of(tab, "#notices")["y"]
        on_first_screen(tab, "#waiting li")
        fits(tab)
        shot(tab, artifacts, f"inbox-{WIDTHS[name][0]}")
    tab = pages["phone"]
    tab.click("#notices a:has-text('raise the db pool')")
    tab.wait_for_selector("#accept-form")
    on_first_screen(tab, "#accept-form button")
    on_first_screen(tab, "#dismiss-form button")
    shot(tab, artifacts, "nudge-390")


def test_web_pages_inbox_filters_and_dismisses_in_bulk(site: Site, pages: Any) -> None:
    tab = pages["desk"]
    open_page(tab, f"{site.base}/", "#filters")
    tab.click("#filters summary")
    tab.select_option("#filter-form select[name=kind]", "notice")
    tab.click("#filter-form button")
    tab.wait_for_url("**/?kind=notice**")
    assert site.token not in tab.url and "_key" not in tab.url  # a GET form carries no key
    tab.wait_for_selector("#notices")
    assert tab.locator("#waiting").count() == 0
    # Live: a notice raised now shows up on the filtered page by itself (server-sent events).
    late = site.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="disk 91% full"))
    tab.wait_for_selector(f"#item-{late}")
    tab.locator("#notices input[type=checkbox]").first.check()
    tab.click("#bulk-form button[value=selected]")
    tab.wait_for_selector(".flash")
    assert "Dismissed 1 notice" in tab.inner_text(".flash")
    tab.click("#bulk-form button[value=all]")
    tab.wait_for_selector("text=Dismissed 3 notice")
    notices = site.store.read(lambda c: qi.list_items(c, status="open"))
    assert [i.kind for i in notices if i.kind == InboxKind.NOTICE] == []


WORLD_MARK = "0 of 20 connections free"  # the service's answer: in the world, in no reason


def outside_evidence(html: str) -> str:
    """The page's <main> without agentd's evidence summary (which may quote the service too)."""
    main = html[html.index("<main") : html.index("</main>")]
    return re.sub(r'<section id="evidence">.*?</section>', "", main, flags=re.DOTALL)


def test_web_pages_item_shows_the_world_once(site: Site, pages: Any, artifacts: Path) -> None:
    """The approval's body quotes the world (`World at the time: <data>…`) and its data holds
    it: the page shows it once, in the raw-world fold, not again in the agent's full text."""
    tab = pages["desk"]
    url = f"{site.base}/items/{site.approval.item_id}"
    open_page(tab, url, "#execute")
    assert "World at the time: <data>" in site.approval.body  # what makes it a test
    # A session of the test's own (the browser's key is not readable, even by its own page).
    session = handed(httpx.get(f"{site.base}/login", params={"token": site.token}))[0]
    html = httpx.get(url, auth=Signed(session)).text
    assert outside_evidence(html).count(WORLD_MARK) == 1, outside_evidence(html)
    assert "World at the time" not in html
    # What a person reads with both folds open: the world once, and in the world's fold.
    for fold in ("#full-text", "#world"):
        tab.locator(f"{fold} > summary").click()
        assert tab.locator(fold).evaluate("d => d.open")
    seen = tab.evaluate(
        "() => { const m = document.querySelector('main').cloneNode(true);"
        " m.querySelector('#evidence')?.remove(); return m.innerText }"
    )
    assert seen.count(WORLD_MARK) == 1, seen
    assert WORLD_MARK in tab.inner_text("#world") and WORLD_MARK not in tab.inner_text("#full-text")
    assert "The run proposes restart" in tab.inner_text("#full-text")  # the text itself is there
    shot(tab, artifacts, "approval-folds-open-1280")


def test_web_pages_approval_decision_and_evidence_on_the_first_screen(
    site: Site, pages: Any, artifacts: Path
) -> None:
    """A normal setup's approval (an HTTP check, a 10-line log tail, a command, two actions the
    run took first): the decision — what will execute, Approve / Deny / Edit, why — and the
    failing source's headline on the first screen, at 390x844 too; the long log folded there."""
    item_id = site.approval.item_id
    for name, tab in pages.items():
        open_page(tab, f"{site.base}/items/{item_id}", "#execute")
        for part in ("#execute", "#approve-form button", "#deny-form button", "#edit summary",
                     "#why", "#evidence h2", "#sources > li:first-child > strong"):  # fmt: skip
            on_first_screen(tab, part)
        fits(tab)
        evidence = tab.inner_text("#evidence")
        assert "503" in evidence  # the service's own answer
        assert "db pool exhausted" in evidence
        assert "healthy until" in evidence  # the watch saw it healthy first
        assert "HEALTHY" not in evidence.upper().replace("HEALTHY UNTIL", "")  # no log badge
        assert "fetch_logs" in tab.inner_text("#actions") and "pool_stats" in evidence
        assert "fetch_logs" not in tab.inner_text("#sources")  # actions are no sources
        assert "marks an error line" in tab.inner_text("#mark")
        log = tab.locator("#sources > li", has_text="service_log")
        folded = log.locator("details.more")
        if name == "phone":  # its first lines, the others one tap away
            more = ev.LOG_LINES - evidence_html.SHOWN
            assert folded.locator("summary").inner_text() == f"{more} more lines"
            assert not folded.locator("code").first.is_visible()
        else:  # room enough: all shown
            assert folded.locator("code").last.is_visible()
        assert "the model's words" in tab.inner_text("#why").lower()
        assert "checkout" in tab.inner_text("#execute")  # the bound argument
        assert not tab.locator("#world").evaluate("d => d.open")  # the raw world: folded
        shot(tab, artifacts, f"approval-{WIDTHS[name][0]}")
    tab = pages["phone"]
    tab.click("#approve-form button")
    tab.wait_for_selector(".flash")
    assert "as proposed" in tab.inner_text(".flash")
    _wait(lambda: site.out.exists() and site.out.read_text().split() == ["checkout"], "the restart")
    open_page(tab, f"{site.base}/items/{item_id}", "#execute")  # decided: what it was bound to
    assert "was bound to" in tab.inner_text("#execute") and tab.locator("#decide").count() == 0
    shot(tab, artifacts, "approval-decided-390")


def test_web_pages_runbook_answers_are_buttons(site: Site, pages: Any, artifacts: Path) -> None:
    tab = pages["phone"]
    open_page(tab, f"{site.base}/items/{site.question_id}", "#decide")
    for word in ("stop", "retry", "skip"):
        on_first_screen(tab, f"#answer-{word} button")
    fits(tab)
    shot(tab, artifacts, "question-390")
    tab.click("#answer-retry button")
    tab.wait_for_selector(".flash")
    done = site.store.read(lambda c: qi.get_item(c, site.question_id))
    assert done.status == InboxStatus.ANSWERED and done.answer == "retry"


def granted(site: Site, tab: Any) -> None:
    """The approval granted and its command's ACT step journaled (result and all). The test of
    the approval grants it first when it ran on this daemon; a test cannot count on that:
    `--dist loadgroup` does not keep this module on one worker under pytest 9.2 with
    pytest-xdist 3.8 (pytest-dev/pytest-xdist#1386), and each worker starts its own daemon."""
    item_id = site.approval.item_id
    if site.store.read(lambda c: qi.get_item(c, item_id)).status == InboxStatus.OPEN:
        open_page(tab, f"{site.base}/items/{item_id}", "#approve-form button")
        tab.click("#approve-form button")
        tab.wait_for_selector(".flash")
    run_id = site.approval.run_id
    assert run_id is not None

    def acted() -> bool:
        steps = site.store.read(lambda c: q.list_steps(c, run_id))
        return any(s.kind == StepKind.ACT and s.result is not None for s in steps)

    _wait(acted, "the approved action's ACT step, with its result, in the journal")


def test_web_pages_goal_controls_and_run_timeline(site: Site, pages: Any, artifacts: Path) -> None:
    granted(site, pages["phone"])
    for name, tab in pages.items():
        open_page(tab, f"{site.base}/goals/{site.goal_id}", "#goal-controls")
        on_first_screen(tab, "#goal-controls")
        on_first_screen(tab, "#next")
        fits(tab)
        shot(tab, artifacts, f"goal-{WIDTHS[name][0]}")
    tab = pages["phone"]
    tab.click("#pause-form button")
    tab.wait_for_selector("#resume-form")
    assert "Paused goal" in tab.inner_text(".flash")
    goal = site.store.read(lambda c: q.get_goal(c, site.goal_id))
    assert goal.status == GoalStatus.PAUSED
    tab.click("#resume-form button")
    tab.wait_for_selector("#pause-form")
    tab.click("#snooze-form button")
    tab.wait_for_selector("#unsnooze-form")
    # The run whose approval was granted (the goal has another, waiting on the question). Its
    # ACT step is in the journal (granted, above) before the page is read: it must show.
    run_link = tab.locator(f"#runs a[href='/runs/{site.approval.run_id}']")
    run_link.click()
    tab.wait_for_selector("#timeline")
    kinds = [k.upper() for k in tab.locator("#timeline .kind").all_inner_texts()]
    assert {"START", "OBSERVE", "WAIT", "WAKE", "ACT"} <= set(kinds), kinds
    last_act = max(n for n, kind in enumerate(kinds) if kind == "ACT")  # two ran before it
    assert kinds.index("WAIT") < kinds.index("WAKE") < last_act, kinds
    assert tab.locator("main pre").count() == 0  # a timeline, not terminal text
    for name, other in pages.items():
        open_page(other, tab.url, "#timeline")
        fits(other)
        shot(other, artifacts, f"run-{WIDTHS[name][0]}")


def test_web_pages_goals_and_not_found(site: Site, pages: Any, artifacts: Path) -> None:
    for name, tab in pages.items():
        open_page(tab, f"{site.base}/goals", f"#goal-{site.goal_id}")
        fits(tab)
        shot(tab, artifacts, f"goals-{WIDTHS[name][0]}")
        open_page(tab, f"{site.base}/items/9999", "main h1")
        text = tab.inner_text("main")
        assert "There is no inbox item 9999" in text and "Back to the inbox" in text
        assert "agentd inbox" not in text and "<code>" not in tab.content()  # no command to run
        fits(tab)
        shot(tab, artifacts, f"not-found-{WIDTHS[name][0]}")
        open_page(tab, f"{site.base}/nowhere", "main h1")
        assert "There is no page at /nowhere" in tab.inner_text("main")
