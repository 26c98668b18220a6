"""The web inbox pages (issue 35): PAGE items at a time, oldest first, after `?after=ID` as
`/api/inbox` pages; over and under a page that is not the whole list, where it sits and links to
the pages either side, which keep the filters; the bulk dismissal of a page's notices is signed as
any form; and a page costs the same at 200 or 5,000 open items (SQLite's virtual machine steps,
as tests/web/test_inbox_reads.py counts them)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.errors import UsageError
from agentd.models import InboxKind, InboxStatus
from agentd.web import data
from agentd.web.inbox_page import PAGE, Filters
from tests.configs import FINISH, scripted_home, with_web
from tests.conftest import Home
from tests.web.test_inbox_reads import counted
from tests.web.test_web import SAME, login, web

ITEM = re.compile(r'id="item-(\d+)"')
PLACE = re.compile(r'<span class="place">(.*?)</span>')
LINK = re.compile(r'<a href="([^"]*)" rel="(prev|next)">')


def notices(home: Home, n: int, *, status: str = "open") -> list[int]:
    def work(c: Any) -> list[int]:
        ids = [qi.post(c, InboxKind.NOTICE, title=f"notice {i}") for i in range(n)]
        if status != "open":
            for i in ids:
                c.execute("UPDATE inbox SET status = ? WHERE item_id = ?", (status, i))
        return ids

    return list(home.store.write(work))


def inbox_home(home: Home, n: int, *, status: str = "open") -> list[int]:
    """A home with the web on and `n` notices in its inbox, their ids."""
    home.write_config(with_web(scripted_home(["finish"])), [FINISH])
    return notices(home, n, status=status)


@asynccontextmanager
async def signed_in(home: Home, serve: Any) -> AsyncIterator[Any]:
    """The daemon served, a web client on it, logged in."""
    await serve()
    async with web(home) as c:
        await login(c, home)
        yield c


def links(page: str) -> dict[str, str]:
    return {rel: href.replace("&amp;", "&") for href, rel in LINK.findall(page)}


def test_filters_read_the_page_and_keep_it_in_their_links() -> None:
    f = Filters.parse({"kind": "notice", "status": "all", "after": "120", "limit": "20"})
    assert (f.after, f.limit) == (120, 20)
    assert f.href(140) == "/?kind=notice&status=all&limit=20&after=140"
    assert f.href(None) == "/?kind=notice&status=all&limit=20"
    assert Filters.parse({}).href(None) == "/" and Filters.parse({}).limit == PAGE
    for bad in ({"after": "x"}, {"limit": "0"}, {"limit": "501"}, {"after": "-1"}):
        with pytest.raises(UsageError):
            Filters.parse(bad)


async def test_inbox_pages_walk_the_list_once_each_way(home: Home, serve: Any) -> None:
    ids = inbox_home(home, 2 * PAGE + 20)
    async with signed_in(home, serve) as c:
        seen: list[int] = []
        path, places, backs = "/", [], []
        while True:
            page = (await c.get(path)).text
            seen += sorted(int(i) for i in ITEM.findall(page))
            places.append(PLACE.findall(page))
            found = links(page)
            backs.append(found.get("prev"))
            if "next" not in found:
                break
            path = found["next"]
        assert seen == ids  # every item once, oldest first, page after page
        total = len(ids)
        assert [p[0] for p in places] == [f"Items 1–50 of {total}", f"Items 51–100 of {total}",
                                          f"Items 101–120 of {total}"]  # fmt: skip
        assert all(len(p) == 2 for p in places)  # over and under the page
        assert backs == [None, "/", f"/?after={ids[PAGE - 1]}"]  # and back, page by page

        # A filter is kept by the links; a page size too.
        page = (await c.get("/?kind=notice&status=all&limit=30")).text
        assert links(page) == {"next": f"/?kind=notice&status=all&limit=30&after={ids[29]}"}
        assert 'value="notice" selected' in page

        # A page's bulk dismissal: a signed form, its shown ids this page's only.
        page = (await c.get(f"/?after={ids[PAGE - 1]}")).text
        shown = re.search(r'name="shown" value="([\d,]+)"', page)
        assert shown is not None and sorted(map(int, shown[1].split(","))) == ids[PAGE : 2 * PAGE]
        r = await c.post("/dismiss", data={"scope": "all", "shown": shown[1]}, headers=SAME)
        assert r.status_code == 303, r.text
        left = home.store.read(lambda c: qi.list_items(c, status="open"))
        assert [i.item_id for i in left] == ids[:PAGE] + ids[2 * PAGE :]
        page = (await c.get("/")).text
        assert PLACE.findall(page)[0] == f"Items 1–50 of {total - PAGE}"


async def test_a_page_past_the_end_says_so_and_links_back(home: Home, serve: Any) -> None:
    ids = inbox_home(home, 3)
    async with signed_in(home, serve) as c:
        page = (await c.get(f"/?after={ids[-1] + 10}&limit=2")).text
        assert "Nothing on this page." in page and not ITEM.findall(page)
        assert links(page) == {"prev": f"/?limit=2&after={ids[0]}"}
        small = (await c.get("/")).text  # the whole list on one page: no pager
        assert 'class="pager"' not in small and len(ITEM.findall(small)) == 3


def test_a_page_reads_its_rows_through_an_index_in_their_order(home: Home) -> None:
    """At 100,000 open items a page must not sort them all to show 50: each statement a page
    runs searches an index, in the page's order (no temporary sort), whatever the filter."""
    ids = inbox_home(home, 300)
    conn: Any = home.store.conn
    for f in (
        Filters(),
        Filters(status="all"),
        Filters(kind="notice"),
        Filters(status="dismissed"),
    ):
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            data.inbox_paged(home.store, f.shared, ids[150], PAGE)
        finally:
            conn.set_trace_callback(None)
        plans = [f"{sql[:90]}: {row[3]}" for sql in statements if "FROM inbox" in sql
                 for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]  # fmt: skip
        # A count reads an index whole (a total is a count); the rows a page shows never are.
        bad = [p for p in plans if "TEMP B-TREE" in p
               or (": SCAN inbox" in p and not p.startswith("SELECT count("))]  # fmt: skip
        assert plans and not bad, plans


def test_closed_items_past_a_status_page_are_not_read(home: Home) -> None:
    """A status's pages read its items through an index: closed items do not add to a page."""
    inbox_home(home, 60)
    conn: Any = home.store.conn
    steps = []
    for closed in (100, 5000):
        notices(home, closed, status=InboxStatus.DISMISSED.value)
        (around, _), n = counted(
            conn, lambda: data.inbox_paged(home.store, Filters().shared, None, PAGE)
        )
        assert around.page.total == 60 and around.page.next_after is not None
        steps.append(n)
    assert steps[1] <= steps[0] * 1.5 + 5, steps


def test_the_first_page_says_what_waits_for_a_decision_on_later_pages(home: Home) -> None:
    """Paged oldest first, a question asked after 60 notices is on page 2: page 1 says so and
    links to the questions alone; page 2, which shows it, does not; a narrowed view neither."""
    from datetime import UTC, datetime

    from agentd.web.inbox_page import Pager, inbox_page

    ids = inbox_home(home, 60)
    home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="which region?"))
    now = datetime.now(UTC)

    def shown(f: Filters) -> str:
        around, goals = data.inbox_paged(home.store, f.shared, f.after, f.limit)
        return inbox_page(around.page.rows, goals, f, now, pager=Pager.of(around, f))

    first = shown(Filters())
    assert 'id="waiting-elsewhere"' in first and '<a href="/?kind=question">1 question</a>' in first
    assert 'id="waiting-elsewhere"' not in shown(Filters(after=ids[PAGE - 1]))
    assert 'id="waiting-elsewhere"' not in shown(Filters(status="all"))


async def box_of(page: Any, selector: str) -> dict[str, float]:
    """Where an element is drawn, once it is: the page's script may swap the shell's content for
    its signed fetch's just after the element first shows (a box read then is None)."""
    for _ in range(50):
        await page.locator(selector).wait_for(state="visible")
        box = await page.locator(selector).bounding_box()
        if box is not None:
            return dict(box)
    raise AssertionError(f"{selector} never stayed drawn")


async def test_inbox_pages_in_chromium_by_keyboard_at_phone_width(
    home: Home, serve: Any, browser: Any, screenshots: Any
) -> None:
    """In a real Chromium at 390 px: the pager is one row no wider than the screen, its links
    finger-sized; Tab reaches Next and Enter opens the next page (the script signs its fetch),
    whose Previous leads back."""
    from tests.web.test_web_browser import free_port, pages_home

    port = free_port()
    home.write_config(pages_home(port), [FINISH])
    ids = notices(home, PAGE + 20)
    await serve()
    base = f"http://127.0.0.1:{port}"
    token = home.paths.api_token.read_text().strip()
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    page = await context.new_page()
    await page.goto(f"{base}/login?token={token}")
    await page.wait_for_url(f"{base}/")
    await page.wait_for_selector("#pager-top a[rel=next]")
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    box, place = (
        await box_of(page, "#pager-top a[rel=next]"),
        await box_of(page, "#pager-top .place"),
    )
    assert box["height"] >= 44
    assert abs(box["y"] - place["y"]) < box["height"]  # one row: the place beside the link
    await page.screenshot(path=screenshots / "web-inbox-pager-390.png")
    await page.focus("#filters summary")  # the filters' fold, then Tab to the pager's link
    for _ in range(3):
        if await page.evaluate("document.activeElement.rel") == "next":
            break
        await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.rel") == "next"
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/?after={ids[PAGE - 1]}")
    await page.wait_for_selector(f"#item-{ids[-1]}")
    assert "Items 51–70 of 70" in await page.inner_text("#pager-top")
    await page.click("#pager-bottom a[rel=prev]")
    await page.wait_for_url(f"{base}/")
    await page.wait_for_selector(f"#item-{ids[0]}")
    await context.close()
