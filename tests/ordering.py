"""The longest test modules first, so that under pytest-xdist no worker is still running a long one
when the others have run out of tests.

Most of the suite's time is in a hundred-odd tests of 8 s and more (daemons, crashes, real
servers); in collection order some of the longest come last (tests/test_readme.py, tests/web/)
and the run's tail was one worker finishing them alone. `make test` deals tests out one at a
time (`--dist loadgroup`), in the order collected: this plugin sorts the modules by the seconds
their collected tests took, each test as timed in the last run that ran it (kept in pytest's
cache, `.pytest_cache/`; a run of a few tests updates only theirs), the longest first. Within a
module the order is never changed (a module's tests may stand on what the tests above them
left). A module not timed yet keeps its place after the timed ones; with no cache (a fresh
clone, `-p no:cacheprovider`) nothing moves.
"""

from __future__ import annotations

from typing import Any

import pytest

KEY = "agentd/test-seconds"
_seconds: dict[str, float] = {}  # this run's, per test (set-up, call and teardown summed)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    timed: dict[str, float] = cache.get(KEY, {}) if cache is not None else {}
    if not timed:
        return
    first: dict[str, int] = {}  # each module's place in collection order
    seconds: dict[str, float] = {}
    for item in items:
        module = _module(item.nodeid)
        first.setdefault(module, len(first))
        seconds[module] = seconds.get(module, 0.0) + timed.get(item.nodeid, 0.0)
    # Deterministic (every xdist worker must collect the same order) and stable within a module.
    items.sort(key=lambda i: (-seconds[_module(i.nodeid)], first[_module(i.nodeid)]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config: Any = session.config
    if hasattr(config, "workerinput") or getattr(config, "cache", None) is None or not _seconds:
        return  # an xdist worker: its controller, which hears every report, keeps the times
    timed = dict(config.cache.get(KEY, {}))
    timed.update({nodeid: round(s, 2) for nodeid, s in _seconds.items()})
    config.cache.set(KEY, timed)
