"""The dialect hooks (agentd/db/dialect.py) give the same answers on both engines: each fragment is
run on a real SQLite connection (the one the store opens), and on PostgreSQL (jsonb columns, the
fixture in tests/postgres.py) with `?` written as `%s` by hand, as the PostgreSQL connection will.
Parameters go in the order their `?` appear: the fragment's first, the document (FROM) last."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentd.db.dialect import POSTGRES, SQLITE, Dialect
from agentd.db.sqlite.connection import connect

DOC = {"n": 3, "f": 1.5, "s": "x", "a": [1, 2], "o": {"k": "deep"}, "z": None}
# (name, SQL built from a dialect, parameters, expected answer)
CASES: list[tuple[str, Callable[[Dialect], str], tuple[Any, ...], Any]] = [
    ("jtext", lambda d: d.jtext("doc", "s"), (), "x"),
    ("jtext nested", lambda d: d.jtext("doc", "o.k"), (), "deep"),
    ("jtext absent", lambda d: d.jtext("doc", "nope"), (), None),
    ("jtext null", lambda d: d.jtext("doc", "z"), (), None),
    ("jnum compares", lambda d: f"{d.jnum('doc', 'f')} < ?", (2,), True),
    ("jint sums", lambda d: f"{d.jint('doc', 'n')} + 1", (), 4),
    ("jlen array", lambda d: d.jlen("doc", "a"), (), 2),
    ("jlen absent", lambda d: f"coalesce({d.jlen('doc', 'nope')}, 0)", (), 0),
    ("jset", lambda d: d.jtext(d.jset("doc", "s"), "s"), ('"y"',), "y"),
    ("in_list", lambda d: d.in_list("2"), (None,), True),  # the list: `lists` below
    ("in_list empty", lambda d: f"NOT ({d.in_list('2')})", (None,), True),
    ("greatest", lambda d: d.greatest("1.0 + ?", "?"), (1.5, 2.0), 2.5),
    ("least", lambda d: d.least("5 + ?", "30"), (1,), 6),
    ("day_of", lambda d: d.day_of("?"), (86400.0 * 365 + 1.0,), "1971-01-01"),
    ("member but", lambda d: d.has_member_but("doc", "new"), (), True),
    ("member but none", lambda d: d.has_member_but('\'{"a": "new"}\'', "new"), (), False),
]
LISTS = {"in_list": [1, 2, 3], "in_list empty": []}


def _params(d: Dialect, name: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    return (d.list_param(LISTS[name]),) if name in LISTS else params


def _truth(value: Any) -> Any:
    return bool(value) if isinstance(value, int) and not isinstance(value, bool) else value


@pytest.mark.parametrize(("name", "sql", "params", "want"), CASES, ids=[c[0] for c in CASES])
def test_dialect_hook_answers_on_sqlite(
    tmp_path: Path, name: str, sql: Callable[[Dialect], str], params: tuple[Any, ...], want: Any
) -> None:
    conn = connect(tmp_path / "t.db")
    assert conn.dialect is SQLITE
    got = conn.execute(
        f"SELECT {sql(SQLITE)} FROM (SELECT ? AS doc)",  # noqa: S608 - the hooks' own fragments
        (*_params(SQLITE, name, params), json.dumps(DOC)),
    ).fetchone()[0]
    conn.close()
    assert (_truth(got) if isinstance(want, bool) else got) == want


def test_dialect_clock_is_the_wall_on_sqlite(tmp_path: Path) -> None:
    conn = connect(tmp_path / "t.db")
    before = time.time()
    now = conn.execute(f"SELECT {SQLITE.now_sql}").fetchone()[0]
    conn.close()
    assert before - 0.01 <= now <= time.time() + 0.01  # julianday's millisecond resolution


@pytest.mark.parametrize(("name", "sql", "params", "want"), CASES, ids=[c[0] for c in CASES])
def test_dialect_hook_answers_on_postgres(
    pg_url: str, name: str, sql: Callable[[Dialect], str], params: tuple[Any, ...], want: Any
) -> None:
    import psycopg

    fragment = sql(POSTGRES).replace("?", "%s")
    text = f"SELECT {fragment} FROM (SELECT %s::jsonb AS doc) AS t"  # noqa: S608 - as above
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(text, (*_params(POSTGRES, name, params), json.dumps(DOC))).fetchone()
    value = got[0] if got is not None else None
    if type(want) in (int, float):  # numeric and bigint come back as Decimal and int
        value = type(want)(value)
    assert value == want


def test_dialect_clock_is_the_servers_on_postgres(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        before = time.time()
        now = conn.execute(f"SELECT {POSTGRES.now_sql}").fetchone()[0]
    assert isinstance(now, float)
    assert before - 1 <= now <= time.time() + 1
