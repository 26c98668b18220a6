"""The PostgreSQL Conn (agentd/db/postgres/connection.py): `?` rewritten for psycopg outside string
literals, JSON read back as text, and the ported queries (RETURNING, ON CONFLICT, the dialect hooks)
answering on PostgreSQL as they do on SQLite: one SQL text for both engines."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentd.db import accounting, checkins, items, marks, outbox, queries, transitions, world
from agentd.db.postgres import schema
from agentd.db.postgres.connection import PostgresConn, connect, label, placeholders
from agentd.models import RunStatus, StepKind


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresConn]:
    conn = connect(pg_url)
    schema.migrate(conn)
    yield conn
    conn.close()


def test_postgres_conn_reads_json_as_text_and_returns_new_ids(pg: PostgresConn) -> None:
    goal_id = queries.add_goal(
        pg, title="100% done?", why="w", agent="a", criteria=["x"], deadline=None
    )
    goal = queries.get_goal(pg, goal_id)
    assert (goal.title, goal.criteria) == ("100% done?", ["x"])
    assert items.add_event(pg, "ping", {"n": 1}, "k1") is not None
    assert items.add_event(pg, "ping", {"n": 2}, "k1") is None  # ON CONFLICT DO NOTHING


def test_placeholders_skip_literals_and_double_percent() -> None:
    sql = "SELECT ? WHERE a LIKE 'x%' AND b = '?' AND c = 'it''s ?' AND d = ?"
    want = "SELECT %s WHERE a LIKE 'x%%' AND b = '?' AND c = 'it''s ?' AND d = %s"
    assert placeholders(sql) == want


def test_label_hides_the_password() -> None:
    assert label("postgresql://me:secret@db:5432/agentd") == "postgresql://me@db:5432/agentd"
    assert label("postgresql://me@/agentd?host=/run") == "postgresql://me@/agentd?host=/run"


def test_postgres_runs_the_journal_of_a_run_through_a_wait(pg: PostgresConn) -> None:
    goal_id = queries.add_goal(pg, title="t", why="w", agent="a", criteria=[], deadline=None)
    run_id = queries.create_run(pg, goal_id=goal_id, agent="a", trigger="cli")
    transitions.suspend(pg, run_id, 0, {"kind": "timer"}, wake_in_s=5.0)
    run = queries.get_run(pg, run_id)
    assert run.status == RunStatus.WAITING
    assert run.wait is not None
    stale = {**run.wait, "seq": run.wait["seq"] - 1}  # a match made against an older wait
    assert transitions.wake(pg, run_id, "me", {"why": "timer"}, 300.0, expect=stale) is None
    epoch = transitions.wake(pg, run_id, "me", {"why": "timer"}, 300.0, expect=run.wait)
    assert epoch == 1
    transitions.finish(pg, run_id, epoch, RunStatus.SUCCEEDED, "ok")
    kinds = [s.kind for s in queries.list_steps(pg, run_id)]
    assert kinds == [StepKind.START, StepKind.WAIT, StepKind.WAKE, StepKind.FINISH]


def test_postgres_check_in_queries_read_json_paths_and_lists(pg: PostgresConn) -> None:
    goal_id = queries.add_goal(pg, title="t", why="w", agent="a", criteria=[], deadline=None)
    run_id = queries.create_run(pg, goal_id=goal_id, agent="a", trigger="cli")
    world.add_snapshot(pg, "a", run_id, {"x": 1}, {"disk": "new"})  # a baseline: not a change
    world.add_snapshot(pg, "a", run_id, {"x": 2}, {"disk": "changed"})
    items.add_event(pg, "other", {"goal_id": goal_id}, None)  # names the goal: heard
    items.add_event(pg, "other", {"goal_id": goal_id + 1}, None)
    checkin_id = checkins.add_due(pg, goal_id, 10.0, 10.0)
    assert checkin_id is not None
    assert checkins.add_due(pg, goal_id, 10.0, 10.0) is None  # ON CONFLICT DO NOTHING
    precheck = {"invalid": [1, 2], "stage": 2, "retry_at": 5.0}
    checkins.advance(pg, checkin_id, "due", status="done", raw="x", model="m", precheck=precheck)
    assert checkins.model_looks(pg, goal_id, checkin_id + 1) == (1, 2)
    assert checkins.model_calls(pg, goal_id, checkin_id + 1) == 3  # a reply and two re-asks
    moved = marks.gather(pg, goal_id, "a", [], None, 0.0, 1e9, 3600.0)
    assert (moved["world_changes"], moved["events"]) == (1, 1)


def test_postgres_sums_are_numbers_as_on_sqlite(pg: PostgresConn) -> None:
    goal_id = queries.add_goal(pg, title="t", why="w", agent="a", criteria=[], deadline=None)
    run_id = queries.create_run(pg, goal_id=goal_id, agent="a", trigger="cli")
    data = {"model": "m", "cost_usd": 0.5, "tokens_cached": 3}
    queries.append_step(pg, run_id, 0, StepKind.DECIDE, data=data, tokens_in=10, tokens_out=5)
    spend = accounting.goal_spend(pg, goal_id)
    assert spend == {"tokens_in": 10, "tokens_out": 5, "tokens": 15, "usd": 0.5}
    assert all(type(spend[k]) is int for k in ("tokens_in", "tokens_out", "tokens"))
    (row,) = accounting.usage(pg)
    assert (row["calls"], row["tokens_in"], row["tokens_cached"], row["usd"]) == (1, 10, 3, 0.5)
    assert type(row["tokens_in"]) is int


def test_postgres_outbox_health_counts_by_status(pg: PostgresConn) -> None:
    for stage in (0, 1):
        outbox.add(pg, key=f"1.0:mail:{stage}", channel="mail", item_id=1, goal_id=None,
                   stage=stage, message={"category": "nudge"}, due_at=5.0, now=1.0)  # fmt: skip
    first = outbox.due(pg, 10.0)[0]
    assert outbox.move(pg, first, 20.0, "UTC", later=True, now=1.0)
    outbox.attempt_failed(pg, first.outbox_id, 2.0, "boom", None)
    health = outbox.channel_health(pg)["mail"]
    assert (health["pending"], health["failed"], health["error"]) == (1, 1, "boom")
