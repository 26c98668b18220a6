"""`agentd doctor` on a home whose [store] names a PostgreSQL database: the connection (a clear FAIL
that never shows the password when it cannot connect), the server's version, the session settings
a new connection carries, the schema against this agentd (older, newer compatible: warn, newer
breaking: FAIL), and the daemons serving it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.db import leases
from agentd.db.postgres import checks as pg_checks
from agentd.db.postgres import connection
from agentd.db.postgres import schema as pg_schema
from tests.conftest import Home

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""
FINISH = {"action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
PG_CHECKS = ["database", "server", "session", "schema", "daemons"]


def doctor(home: Home) -> tuple[Result, dict[str, Any], str]:
    """The report as JSON (by check name), and the text a person reads."""
    runner = CliRunner()
    as_json = runner.invoke(app, ["--home", str(home.root), "doctor", "--json"])
    text = runner.invoke(app, ["--home", str(home.root), "doctor"])
    start = as_json.stdout.find("{\n")
    report = json.loads(as_json.stdout[start:]) if start >= 0 else {}
    return as_json, {c["name"]: c for c in report.get("checks", [])}, text.stdout


def line(text: str, name: str) -> str:
    return next(ln for ln in text.splitlines() if ln.split()[1:2] == [name])


@pytest.fixture
def pg_home(tmp_path: Path, pg_url: str) -> Any:
    h = Home(tmp_path / "home", pg_url)
    h.write_config(CONFIG, [FINISH])
    yield h
    h.close()


def migrated(home: Home) -> Home:
    home.store  # noqa: B018  # creates agentd's schema in the new database
    home.close()
    home._store = None
    return home


def test_healthy_database_without_a_daemon(pg_home: Home) -> None:
    home = migrated(pg_home)

    result, checks, text = doctor(home)

    assert result.exit_code == 0, result.output
    names = [n for n in checks if n in PG_CHECKS]
    assert names == PG_CHECKS  # the store's checks, in order, where the SQLite file's were
    assert checks["database"]["ok"] and "connected as agentd" in checks["database"]["message"]
    assert checks["server"]["ok"] and checks["server"]["message"].startswith("PostgreSQL 1")
    session = checks["session"]
    assert session["ok"], session
    assert "idle_in_transaction_session_timeout 5s (lease 30s)" in session["message"]
    assert "lock_timeout 5s" in session["message"] and "TimeZone UTC" in session["message"]
    latest = len(pg_schema.MIGRATIONS)
    assert checks["schema"] == {"name": "schema", "ok": True, "required": True, "warning": False,
                                "message": f"version {latest} of {latest} (current)"}  # fmt: skip
    daemons = checks["daemons"]
    assert not daemons["ok"] and not daemons["required"]  # information: nothing serves it yet
    assert "0 live" in daemons["message"] and "start one with `agentd serve`" in daemons["message"]
    assert line(text, "daemons").startswith("info")
    assert line(text, "session").startswith("ok")


def test_daemons_live_and_silent_are_counted(pg_home: Home) -> None:
    home = migrated(pg_home)

    def work(c: Any) -> None:
        for owner, pid in (("a:1:x", 1), ("b:2:y", 2), ("c:3:z", 3)):
            leases.register(c, owner=owner, host=owner[0], pid=pid, version="9.9", lease_s=30)
        c.execute("UPDATE daemons SET renewed_at = renewed_at - 90 WHERE owner = 'c:3:z'")

    home.store.write(work)
    home.close()

    result, checks, text = doctor(home)

    assert result.exit_code == 0, result.output
    message = checks["daemons"]["message"]
    assert checks["daemons"]["ok"]
    assert message.startswith("2 live: ")  # the newest first
    assert "a pid 1 (9.9, 0 runs, renewed " in message and "b pid 2 (9.9" in message
    assert "1 silent past its lease in the last day: c pid 3 (9.9, 0 runs, renewed 1m30s" in message
    assert line(text, "daemons").startswith("ok")


def test_unreachable_database_fails_clearly_without_the_password(
    tmp_path: Path, pg_home: Home
) -> None:
    nowhere = tmp_path / "no-server"  # a socket dir where no server listens
    nowhere.mkdir()
    url = f"postgresql://agentd:hunter2-secret@/agentd?host={nowhere}&password=hunter2-secret"
    home = pg_home
    home.paths.config.write_text(CONFIG + f'\n[store]\nurl = "{url}"\n')

    result, checks, text = doctor(home)

    assert result.exit_code == 1
    assert "hunter2" not in result.stdout + result.stderr + text
    fail = line(text, "database")
    assert fail.startswith("FAIL  database       postgresql://agentd@/agentd?host=")
    assert "cannot connect" in fail and "No such file or directory" in fail
    assert "Check [store] in config.toml" in text  # what to do, on the lines below
    assert [n for n in checks if n in PG_CHECKS] == ["database"]  # nothing more can be told


def test_url_env_naming_nothing_is_a_database_failure(pg_home: Home) -> None:
    home = pg_home
    home.paths.config.write_text(CONFIG + '\n[store]\nurl_env = "AGENTD_TEST_NO_SUCH_URL"\n')

    result, checks, _ = doctor(home)

    assert result.exit_code != 0
    assert not checks["database"]["ok"]
    assert "AGENTD_TEST_NO_SUCH_URL" in checks["database"]["message"]


def test_empty_database_says_how_to_create_the_schema(pg_home: Home) -> None:
    result, checks, _ = doctor(pg_home)  # the fresh database, never migrated

    assert result.exit_code == 1
    assert checks["database"]["ok"] and checks["server"]["ok"] and checks["session"]["ok"]
    assert not checks["schema"]["ok"] and "the database is empty" in checks["schema"]["message"]
    assert "daemons" not in checks  # nothing to read yet


def _newer(url: str, breaking: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, name, breaking, applied_at)"
            " VALUES (%s, 'from the future', %s, 0)",
            (len(pg_schema.MIGRATIONS) + 1, breaking),
        )


def test_newer_compatible_schema_warns(pg_home: Home, pg_url: str) -> None:
    home = migrated(pg_home)
    _newer(pg_url, breaking=False)

    result, checks, text = doctor(home)

    assert result.exit_code == 0, result.output  # served as it is
    schema = checks["schema"]
    assert not schema["ok"] and not schema["required"] and schema["warning"]
    assert "newer than this agentd knows" in schema["message"] and "compatible" in schema["message"]
    assert line(text, "schema").startswith("warn")
    assert "daemons" in checks


def test_newer_breaking_schema_fails(pg_home: Home, pg_url: str) -> None:
    home = migrated(pg_home)
    _newer(pg_url, breaking=True)

    result, checks, text = doctor(home)

    assert result.exit_code == 1
    schema = checks["schema"]
    assert not schema["ok"] and schema["required"]
    assert "breaking migrations" in schema["message"] and "from the future" in schema["message"]
    assert "upgrade agentd" in schema["message"]
    assert line(text, "schema").startswith("FAIL")


def test_older_schema_fails_with_what_upgrades_it(pg_home: Home, pg_url: str) -> None:
    home = migrated(pg_home)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM"
            " schema_migrations)"
        )

    _, checks, _ = doctor(home)

    latest = len(pg_schema.MIGRATIONS)
    assert not checks["schema"]["ok"]
    assert checks["schema"]["message"].startswith(f"version {latest - 1} of {latest}")
    assert "`agentd serve`" in checks["schema"]["message"]


def test_session_settings_lost_by_a_new_connection_fail(
    pg_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a pooler in transaction mode does to a SET: the next statement sees the server's
    # default (0, off). Played here by connections that never set it.
    home = migrated(pg_home)
    monkeypatch.setattr(connection, "idle_in_transaction_ms", lambda lease_s: 0)

    result, checks, text = doctor(home)

    assert result.exit_code == 1
    session = checks["session"]
    assert not session["ok"]
    assert (
        "idle_in_transaction_session_timeout is 0 (off), not below the lease" in session["message"]
    )
    assert "pooler in transaction or statement mode" in session["message"]
    assert "lock_timeout" not in session["message"]  # only what is wrong is said
    assert line(text, "session").startswith("FAIL")


def test_a_lease_shorter_than_the_idle_timeout_fails(
    pg_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = migrated(pg_home)
    monkeypatch.setattr(connection, "idle_in_transaction_ms", lambda lease_s: 120_000)

    _, checks, _ = doctor(home)

    assert "is 120s, not below the lease ([store] lease_s = 30)" in checks["session"]["message"]


def test_an_old_server_fails(pg_home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    home = migrated(pg_home)
    monkeypatch.setattr(pg_checks, "MIN_SERVER", 990000)  # this server, as if older than needed

    result, checks, _ = doctor(home)

    assert result.exit_code == 1
    assert not checks["server"]["ok"]
    assert "too old; agentd needs PostgreSQL 13 or newer" in checks["server"]["message"]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:secret@db:5432/agentd", "postgresql://me@db:5432/agentd"),
        ("postgresql://me@/a?host=/run&password=secret&port=5", "postgresql://me@/a?host=/run&port=5"),
        ("postgresql://me:secret@[::1]:5432/a", "postgresql://me@[::1]:5432/a"),
        ("postgresql://me:secret@h1:5432,h2:5433/a", "postgresql://me@h1:5432,h2:5433/a"),
        ("postgresql://me@/a?host=/run", "postgresql://me@/a?host=/run"),
    ],
)  # fmt: skip
def test_label_never_shows_a_password(url: str, shown: str) -> None:
    assert connection.label(url) == shown


def test_goals_and_triggers_are_checked_in_the_database(pg_home: Home) -> None:
    home = migrated(pg_home)
    goal_id = home.add_goal(agent="gone")  # an agent the config does not have
    home.close()

    result, checks, _ = doctor(home)

    assert result.exit_code == 1
    assert "agent 'gone', gone from the config" in checks[f"goal {goal_id}"]["message"]
