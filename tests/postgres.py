"""PostgreSQL fixtures: one throw-away cluster per test process (tests/pg_cluster.py), one fresh
database per test.

- `pg_cluster` (session): a running `Cluster`, started the first time a test asks for it and stopped
  (its dir removed) at the end of the session.
- `pg_url` (function): the libpq URL of an empty database made for this test alone
  (`postgresql://agentd@/<db>?host=<socket dir>&port=5432`), dropped after it.

Under pytest-xdist each worker is its own session, so each worker starts its own cluster: a cluster
costs ~1 s and a few MB, and in exchange workers share nothing — no lock, no reference count, no "last
worker stops it" (xdist has no hook for that), and a crashed worker's cluster is swept by the next start
(its `owner.pid` is dead) instead of wedging the others. A worker that runs no PostgreSQL test starts none.

When the binaries (Debian's `postgresql`), psycopg, or as root `runuser` and the `postgres` account are
missing, these tests are skipped with a reason saying what is missing and how to install it, and a
banner at the end of the run repeats it. With AGENTD_REQUIRE_POSTGRES=1 (set by `.ci/run`) they fail.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pg_cluster import Cluster, missing_reason

BANNER_MARK = "POSTGRESQL TEST SKIPPED"
_counter = itertools.count(1)


def _skip_or_fail_if_missing() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("AGENTD_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason.replace("SKIPPED", "FAILED (AGENTD_REQUIRE_POSTGRES=1)"), pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """This test process's own running cluster (fsync on, socket only)."""
    _skip_or_fail_if_missing()
    cluster = Cluster.start(settings={"shared_buffers": "32MB"})  # 4 workers, 2 cores: stay small
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty database for this test only."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    test = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())
    name = f"t{next(_counter)}_{worker}_{test}"[:63]  # PostgreSQL truncates names at 63 bytes
    url = pg_cluster.create_database(name)
    try:
        yield url
    finally:
        pg_cluster.drop_database(name)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner a skipped PostgreSQL test cannot hide behind. It reads the skip reports themselves,
    so it also works under xdist, where the skips happen in the workers."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if BANNER_MARK in text:
            reason = text[text.index(BANNER_MARK) :]
            reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        terminalreporter.write_sep("!", f"{count} PostgreSQL test(s) skipped", red=True, bold=True)
        terminalreporter.write_line(reason, red=True, bold=True)
