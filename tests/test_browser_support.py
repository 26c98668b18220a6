"""The real-browser fixtures work: Chromium opens a page, runs its script and takes a screenshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PAGE = "data:text/html,<title>t</title><p id=p>hello</p><script>document.title='ran'</script>"


async def test_browser_opens_a_page_and_screenshots(browser: Any, screenshots: Path) -> None:
    page = await browser.new_page()
    await page.goto(PAGE)
    assert await page.title() == "ran"
    assert await page.text_content("#p") == "hello"
    shot = screenshots / "browser-support.png"
    await page.screenshot(path=shot)
    assert shot.read_bytes().startswith(b"\x89PNG")
