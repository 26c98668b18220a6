"""`agentd store copy` at the engine level (agentd/db/copy.py): a home filled by real use — the
demo's (a run through an approval wait, a build with its artifacts, notices), then a schedule, a
question answered and one left open, check-ins, an outbox row, a web session, events through the
CLI — copied from its SQLite file into a fresh PostgreSQL database: every state table, ids and
values kept, verified, sequences moved on, triggers back on; and the refusals, which write nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentd.db import checkins, items, outbox, queries, sessions
from agentd.db import copy as db_copy
from agentd.db.postgres.backend import PostgresBackend
from agentd.db.postgres.connection import connect
from agentd.db.sqlite import schema as sqlite_schema
from agentd.db.sqlite.backend import SQLiteBackend
from agentd.db.sqlite.connection import connect as sqlite_connect
from agentd.db.sqlite.connection import open_migrated
from agentd.db.store import SyncStore
from agentd.errors import StateError
from agentd.models import InboxKind, InboxStatus, StepKind
from tests.demo.test_service_watch import AGENTD, cli

pytestmark = pytest.mark.timeout(120)


def fill_home(home: Path) -> Path:
    """The demo's home (`agentd demo --yes --build`), then what the demo leaves empty, written by
    agentd's own code: every state table holds rows, so every checksum proves something."""
    done = subprocess.run(
        [*AGENTD, "demo", "--yes", "--build", "--home", str(home)],
        capture_output=True, text=True, timeout=90, env={"COLUMNS": "140", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    cli(home, "goal", "schedule", "1", "--cron", "0 9 * * mon-fri", "--tz", "Europe/Berlin")
    cli(home, "event", "send", "note", "--key", "n-1", "--data",
        json.dumps({"ü": [1, 2.5, None, True], "z": {"b": "x", "a": "\"quoted\""}}))  # fmt: skip
    store = SyncStore(home / "agentd.db")
    try:
        asked = store.write(lambda c: items.post(c, InboxKind.QUESTION, goal_id=1, title="Which?"))
        store.write(lambda c: items.post(c, InboxKind.QUESTION, goal_id=1, title="Still open?"))
        cli(home, "inbox", "answer", str(asked), "eu-west, as before")
        now = store.read(
            lambda c: float(c.execute("SELECT max(updated_at) FROM goals").fetchone()[0])
        )
        store.write(lambda c: _more(c, now))
    finally:
        store.close()
    return home


def _more(c: Any, now: float) -> None:
    checkins.add_due(c, 1, now - 60, now - 59, schedule_id=1)
    checkins.add_due(c, 1, now - 3600, now - 50, reason="missed while down",
                     status=checkins.CheckinStatus.MISSED)  # fmt: skip
    outbox.add(c, key="1:0:email:0", channel="email", item_id=1, goal_id=1, stage=0,
               message={"title": "approve rollback?", "lines": ["a", "b"]}, due_at=now, now=now)  # fmt: skip
    sessions.open_session(c, key_hash="k" * 64, token_mark="m", client="curl", now=now,
                          expires_at=now + 3600)  # fmt: skip
    c.execute(  # a live daemon's heartbeat: never copied
        "INSERT INTO daemons (owner, host, pid, version, lease_s, started_at, renewed_at)"
        " VALUES ('h:1:x', 'h', 1, 'test', 30, ?, ?)",
        (now, now),
    )


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fill_home(tmp_path_factory.mktemp("filled") / "home")


@pytest.fixture
def home(filled: Path, tmp_path: Path) -> Path:
    """A test's own copy of the filled home."""
    return Path(shutil.copytree(filled, tmp_path / "home"))


def _rows(backend: Any, table: db_copy.Table) -> Counter[str]:
    """The table's rows in one canonical form, counted (independent of the copy's checksum)."""
    conn = backend.connect()
    try:
        form = db_copy.row_form([c.kind for c in table.columns])
        return Counter(form(row) for row in conn.execute(db_copy._select(table)))
    finally:
        conn.close()


def _plan(source: Any, target: Any) -> list[db_copy.Table]:
    src, tgt = source.connect(), target.connect()
    try:
        return db_copy.plan(src, tgt)
    finally:
        src.close()
        tgt.close()


def test_copy_carries_every_state_table_row_for_row(home: Path, pg_url: str) -> None:
    before = hashlib.sha256((home / "agentd.db").read_bytes()).hexdigest()
    source, target = SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home)
    seen: list[str] = []
    report = db_copy.copy(source, target, lambda t: seen.append(t.table))

    assert [t.table for t in report.tables] == seen
    assert all(t.ok and t.rows > 0 for t in report.tables), report.tables
    assert set(report.skipped) == {"daemons", "schema_migrations", "agentd_locks"}
    tables = _plan(source, target)
    for table in tables:  # the same rows on both sides, read again from each
        assert _rows(source, table) == _rows(target, table), table.name
    order = [t.name for t in tables]  # referenced before referencing
    assert order.index("goals") < order.index("runs") < order.index("steps")
    pg = connect(pg_url)
    try:
        assert pg.execute("SELECT count(*) FROM daemons").fetchone()[0] == 0
    finally:
        pg.close()
    assert hashlib.sha256((home / "agentd.db").read_bytes()).hexdigest() == before


def test_every_table_of_the_schema_is_copied_or_skipped_for_a_reason(
    filled: Path, tmp_path: Path, pg_url: str
) -> None:
    # The table list comes from the catalogues: a table added to both schemas is copied as it
    # is. This fails when one is added and the filled home above does not fill it (its copy
    # would prove nothing), or when a skip is added without a reason or names no table.
    fresh = open_migrated(tmp_path / "fresh.db")
    sqlite_tables = {t for t in db_copy.table_names(fresh) if not t.startswith("sqlite_")}
    fresh.close()
    pg = connect(pg_url)
    try:
        PostgresBackend(pg_url, tmp_path).migrate(pg)
        pg_tables = db_copy.table_names(pg)
    finally:
        pg.close()
    copied = sqlite_tables - set(db_copy.SKIPPED)
    assert copied == pg_tables - set(db_copy.SKIPPED), "the two schemas hold other tables"
    assert set(db_copy.SKIPPED) <= sqlite_tables | pg_tables, "a skip that names no table"
    assert all(why for why in db_copy.SKIPPED.values())
    store = SyncStore(filled / "agentd.db", migrate_schema=False)
    try:
        counts = store.read(lambda c: {t: _count(c, t) for t in copied})
    finally:
        store.close()
    empty = sorted(t for t, n in counts.items() if not n)
    assert not empty, f"fill these tables in fill_home, so that their copy is checked: {empty}"


def _count(c: Any, table: str) -> int:
    return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608


def test_the_copy_keeps_ids_moves_sequences_on_and_turns_triggers_back_on(
    home: Path, pg_url: str
) -> None:
    report = db_copy.copy(SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home))
    assert report.sequences["goals.goal_id"] == 2 and report.sequences["runs.run_id"] == 3
    (home / "config.toml").write_text(f'[store]\nurl = "{pg_url}"\n')
    store = SyncStore(home / "agentd.db")  # the home on PostgreSQL now
    try:
        assert store.read(lambda c: queries.get_goal(c, 1).title) == "Keep checkout healthy"
        goal = store.write(lambda c: queries.add_goal(c, title="next", why="w", agent="a",
                                                      criteria=[], deadline=None))  # fmt: skip
        run = store.write(lambda c: queries.create_run(c, goal_id=goal, agent="a", trigger="t"))
        item = store.write(lambda c: items.post(c, InboxKind.NOTICE, goal_id=goal, title="n"))
        assert (goal, run) == (2, 3) and item == report.sequences["inbox.item_id"]
        store.write(lambda c: queries.append_step(c, run, 0, StepKind.ACT, action="restart"))
        queued = store.read(
            lambda c: c.execute("SELECT max(item_id) FROM notify_queue").fetchone()[0]
        )
        logged = store.read(lambda c: _count(c, "rate_log"))
        answered = store.read(lambda c: items.get_item(c, 4).status)
    finally:
        store.close()
    assert queued == item  # the inbox trigger runs again
    assert logged == next(t.rows for t in report.tables if t.table == "rate_log") + 1
    assert answered == InboxStatus.ANSWERED


def test_a_target_that_holds_anything_is_refused_and_left_as_it_was(
    home: Path, pg_url: str
) -> None:
    pg = connect(pg_url)
    try:
        pg.execute("CREATE TABLE invoices (id int)")
        with pytest.raises(
            db_copy.TargetNotEmpty, match=r"tables agentd did not make \(invoices\)"
        ):
            db_copy.copy(SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home))
        assert db_copy.table_names(pg) == {"invoices"}  # not even migrated
        pg.execute("DROP TABLE invoices")
        target = PostgresBackend(pg_url, home)
        target.migrate(pg)
        queries.add_goal(pg, title="t", why="w", agent="a", criteria=[], deadline=None)
        with pytest.raises(
            db_copy.TargetNotEmpty, match=r"not empty: it holds rows \(cadences 1, goals 1\)"
        ):
            db_copy.copy(SQLiteBackend(home / "agentd.db"), target)
        assert _count(pg, "goals") == 1 and _count(pg, "runs") == 0
    finally:
        pg.close()


def test_a_migrated_empty_target_is_taken(home: Path, pg_url: str) -> None:
    target = PostgresBackend(pg_url, home)
    pg = target.connect()
    target.migrate(pg)  # a daemon started on it before the copy, which wrote nothing
    pg.close()
    report = db_copy.copy(SQLiteBackend(home / "agentd.db"), target)
    assert all(t.ok for t in report.tables)


def test_an_older_source_schema_is_refused_before_anything_is_written(
    tmp_path: Path, pg_url: str
) -> None:
    old = sqlite_schema.MIGRATIONS[:-1]  # a file the previous agentd made
    raw = sqlite_connect(tmp_path / "agentd.db")
    sqlite_schema.migrate(raw, old)
    raw.close()
    with pytest.raises(StateError, match=rf"schema version {len(old)}, older.*init"):
        db_copy.copy(SQLiteBackend(tmp_path / "agentd.db"), PostgresBackend(pg_url, tmp_path))
    pg = connect(pg_url)
    try:
        assert db_copy.table_names(pg) == set()
    finally:
        pg.close()


def test_a_value_the_target_refuses_rolls_the_whole_copy_back(home: Path, pg_url: str) -> None:
    store = SyncStore(home / "agentd.db")
    try:  # PostgreSQL's text holds no NUL character; SQLite's does
        store.write(lambda c: c.execute("UPDATE inbox SET body = ? WHERE item_id = 2", ("a\x00b",)))
    finally:
        store.close()
    with pytest.raises(StateError, match=r"table inbox: .*rolled back, nothing was written"):
        db_copy.copy(SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home))
    pg = connect(pg_url)
    try:
        assert _count(pg, "goals") == 0 and _count(pg, "runs") == 0  # the schema stays, empty
    finally:
        pg.close()


def test_values_are_compared_in_one_form_whichever_engine_read_them() -> None:
    form = db_copy.row_form(["bigint", "double precision", "boolean", "jsonb", "text"])
    sqlite_row = (1, 2, 1, '{"b": [1, 2.5], "a": "x"}', "t")
    postgres_row = (1, 2.0, True, '{"a": "x", "b": [1, 2.5]}', "t")  # jsonb's own key order
    assert form(sqlite_row) == form(postgres_row)
    assert form((1, 2, 0, '{"a": "x", "b": [2.5, 1]}', "t")) != form(postgres_row)
    assert db_copy._to_target("boolean")(1) is True and db_copy._to_target("jsonb")("{}") == "{}"
    assert db_copy._to_target("double precision")(3) == 3.0


def test_a_write_to_the_home_during_the_copy_rolls_it_back(home: Path, pg_url: str) -> None:
    store = SyncStore(home / "agentd.db")  # a command's, answering while the copy runs
    answered: list[int] = []

    def answer_once(done: db_copy.TableCopy) -> None:
        if not answered:
            answered.append(store.write(lambda c: items.post(c, InboxKind.NOTICE, title="late")))

    try:
        with pytest.raises(StateError, match=r"changed while it was copied.*copy again"):
            db_copy.copy(SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home),
                         answer_once)  # fmt: skip
    finally:
        store.close()
    pg = connect(pg_url)
    try:
        assert _count(pg, "inbox") == 0 and _count(pg, "goals") == 0
    finally:
        pg.close()
    report = db_copy.copy(SQLiteBackend(home / "agentd.db"), PostgresBackend(pg_url, home))
    assert next(t.rows for t in report.tables if t.table == "inbox") == answered[0]
