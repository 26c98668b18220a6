"""Real-browser fixtures: Debian's Chromium driven by Playwright's Python package.

Playwright's own browser download cannot reach its host here, so we never run `playwright install`:
the browser is Debian's `chromium` (`apt-get install -y chromium`; `make test` and `.ci/run` install it
through `.ci/install-chromium`), launched through `executable_path`. When Playwright or Chromium is
missing, the tests that use these fixtures are skipped with a reason naming what is missing and how to
install it, and a banner at the end of the run repeats it — a skipped browser test must never pass
unnoticed. With AGENTD_REQUIRE_BROWSER=1 (set by `.ci/run`) they fail instead.

Fixtures:
- `browser`: a Playwright *async* `Browser` (tests here run under pytest-asyncio's auto mode, and an
  in-process daemon lives in the test's event loop; Playwright's sync API refuses to run inside a
  running loop). One Chromium per test; open pages with `await browser.new_context()` /
  `await context.new_page()`.
- `sync_browser`: a Playwright *sync* `Browser`, for plain (non-async) tests whose server runs in a
  thread or a subprocess. Never use it from an `async def` test.
- `screenshots`: the folder `test-artifacts/` at the repo root (created; ignored by git); save PNGs there,
  e.g. `await page.screenshot(path=screenshots / "inbox.png")`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import servers

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO_ROOT / "test-artifacts"
BROWSER_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = (
    "install what is missing with `make test` as root (it runs `.ci/install-chromium`), or by hand: "
    "`apt-get install -y chromium fonts-liberation` and `.venv/bin/pip install -e '.[dev]'` "
    "(never `playwright install`: its browser download cannot be reached here)"
)


def chromium_path() -> str | None:
    """Debian's Chromium, or $AGENTD_TEST_CHROMIUM when set."""
    override = os.environ.get("AGENTD_TEST_CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_reason() -> str | None:
    """Why a real browser cannot run here, or None when it can."""
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the Python package `playwright`")
    if chromium_path() is None:
        where = os.environ.get("AGENTD_TEST_CHROMIUM") or "no `chromium` on PATH"
        missing.append(f"Debian's `chromium` ({where})")
    if not missing:
        return None
    return f"REAL-BROWSER TEST SKIPPED: missing {' and '.join(missing)}; {INSTALL_HINT}"


def _skip_if_missing() -> None:
    servers.require(missing_reason(), "BROWSER")


def launch_options() -> dict[str, Any]:
    args = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to start as root with its sandbox on
    return {"executable_path": chromium_path(), "headless": True, "args": args}


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium (Playwright async API), closed after the test."""
    _skip_if_missing()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(**launch_options())
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def sync_browser() -> Iterator[Any]:
    """A headless Chromium (Playwright sync API) for non-async tests, closed after the test."""
    _skip_if_missing()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(**launch_options())
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def screenshots() -> Path:
    """`test-artifacts/` at the repo root, where browser tests keep their screenshots."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
