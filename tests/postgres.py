"""PostgreSQL fixtures: one throw-away cluster per test process (tests/pg_cluster.py), one fresh
database per test.

- `pg_cluster` (session): a running `Cluster`, started the first time a test asks for it and stopped
  (its dir removed) at the end of the session.
- `pg_url` (function): the libpq URL of an empty database made for this test alone
  (`postgresql://agentd@/<db>?host=<socket dir>&port=5432`), dropped after it.
- `pg_migrated_url` (function): the same, but a copy of `pg_migrated` (session), a template database
  agentd migrated once: the homes of the tests marked `backends` (tests/conftest.py's `store_url`)
  start from it instead of running every migration per test (~0.35 s each on a loaded machine).
  A test of migrating itself asks for `pg_url`.

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

import pytest

from tests import servers
from tests.pg_cluster import Cluster, missing_reason

BANNER_MARK = "POSTGRESQL TEST SKIPPED"
MIGRATED = "agentd_migrated"  # each cluster's template: a database agentd has migrated
_counter = itertools.count(1)


def _skip_or_fail_if_missing() -> None:
    servers.require(missing_reason(), "POSTGRES")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """This test process's own running cluster (fsync on, socket only)."""
    _skip_or_fail_if_missing()
    cluster = Cluster.start(settings={"shared_buffers": "32MB"})  # 4 workers, 2 cores: stay small
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_migrated(pg_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name of this cluster's template database, migrated by agentd to its latest schema
    once: a home's database copied from it (`CREATE DATABASE … TEMPLATE`, a file copy) is what
    migrating a new one makes, without running every migration again per test."""
    from agentd.db.postgres.backend import PostgresBackend

    url = pg_cluster.create_database(MIGRATED)
    PostgresBackend(url, tmp_path_factory.mktemp("pg-template")).open_migrated().close()
    return MIGRATED


def database_name(request: pytest.FixtureRequest, prefix: str = "t") -> str:
    """A database name unique in this session that says which test made it (63 bytes at most:
    PostgreSQL truncates longer names)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    test = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())
    return f"{prefix}{next(_counter)}_{worker}_{test}"[:63]


@pytest.fixture
def pg_url(pg_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty database for this test only."""
    name = database_name(request)
    url = pg_cluster.create_database(name)
    try:
        yield url
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def pg_migrated_url(
    pg_cluster: Cluster, pg_migrated: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """The URL of a new database for this test only, at agentd's latest schema and holding no
    rows (a copy of `pg_migrated`): what a home's first open would make of an empty one."""
    name = database_name(request, "m")
    url = pg_cluster.create_database(name, template=pg_migrated)
    try:
        yield url
    finally:
        pg_cluster.drop_database(name)
