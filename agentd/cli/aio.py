"""Running a coroutine from a CLI command, whatever thread calls it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_apart(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(make())`, on a thread of its own when this thread already runs a loop (the
    CLI called from async code: an MCP tool, a test), where asyncio.run would refuse. The
    coroutine is made where it runs, so a refusal never leaves one unawaited."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
