"""The PostgreSQL test fixtures (tests/postgres.py, tests/pg_cluster.py): a socket-only, fsync'd cluster
per test process, a fresh database per test, loud skips (or failures in CI) when PostgreSQL is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import postgres
from tests.pg_cluster import Cluster, sweep_orphans


def connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url)


def test_pg_url_connects_over_the_unix_socket_only(pg_url: str) -> None:
    with connect(pg_url) as conn:
        dbname, server_addr = conn.execute(
            "SELECT current_database(), inet_server_addr()"
        ).fetchone()
        listen = conn.execute("SHOW listen_addresses").fetchone()
    assert pg_url.split("/")[3].startswith(dbname)
    assert server_addr is None  # NULL: the connection came over a unix socket
    assert listen == ("",)  # and the server listens on no TCP address


@pytest.mark.parametrize("attempt", [1, 2])
def test_pg_url_gives_each_test_a_fresh_database(pg_url: str, attempt: int) -> None:
    with connect(pg_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables.fetchone() == (0,)
        # Leave a table behind: the other attempt must not see it.
        conn.execute("CREATE TABLE left_behind (attempt int)")
        conn.execute("INSERT INTO left_behind VALUES (%s)", (attempt,))


def test_pg_url_a_committed_row_survives_a_reconnect(pg_url: str) -> None:
    with connect(pg_url) as conn:
        conn.execute("CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t (v) VALUES (%s)", ("kept",))
        conn.commit()
        conn.execute("INSERT INTO t (v) VALUES (%s)", ("rolled back",))
        conn.rollback()
    with connect(pg_url) as conn:
        assert conn.execute("SELECT v FROM t").fetchall() == [("kept",)]


def test_pg_cluster_commits_are_durable(pg_url: str) -> None:
    with connect(pg_url) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    assert settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def test_pg_cluster_drop_database_ends_a_connection_left_open(pg_cluster: Cluster) -> None:
    url = pg_cluster.create_database("left_open")
    leaked = connect(url)
    pg_cluster.drop_database("left_open")
    with connect(pg_cluster.url()) as conn:
        found = conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'left_open'")
        assert found.fetchone() == (0,)
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        leaked.execute("SELECT 1")  # the server ended it
    leaked.close()


@pytest.mark.slow
def test_pg_cluster_of_a_dead_test_run_is_swept_by_the_next_start(pg_cluster: Cluster) -> None:
    orphan = Cluster.start()
    socket = orphan.root / ".s.PGSQL.5432"
    assert socket.exists()
    (orphan.root / "owner.pid").write_text(str(_a_dead_pid()))
    sweep_orphans()
    assert not orphan.root.exists()
    assert pg_cluster.root.exists()  # a live owner's cluster (this process's) is left alone


def _a_dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_pg_fixtures_skip_loudly_without_postgresql(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTD_TEST_PG_BIN", str(tmp_path))  # a bin dir with no initdb in it
    monkeypatch.delenv("AGENTD_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        postgres._skip_or_fail_if_missing()
    assert "POSTGRESQL TEST SKIPPED: missing PostgreSQL's server binaries" in str(skipped.value)
    assert ".ci/install-postgresql" in str(skipped.value)


def test_pg_fixtures_fail_without_postgresql_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTD_TEST_PG_BIN", str(tmp_path))
    monkeypatch.setenv("AGENTD_REQUIRE_POSTGRES", "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        postgres._skip_or_fail_if_missing()
    assert "POSTGRESQL TEST FAILED (AGENTD_REQUIRE_POSTGRES=1)" in str(failed.value)
