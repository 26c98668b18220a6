"""The few places where SQLite's and PostgreSQL's SQL differ, as small hooks over one SQL text.

Queries keep `?` placeholders (a PostgreSQL connection rewrites them once per statement) and are
written in the subset both engines share (`RETURNING`, `ON CONFLICT DO NOTHING`, `count(*) FILTER`);
what is left differs by engine: JSON paths, list parameters, scalar greatest/least, a day from an
epoch, the database's clock. A query reaches its engine's hooks as `c.dialect`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    """One engine's forms of what differs. Every hook returns a SQL fragment (or a parameter)."""

    engine: str  # "sqlite" | "postgres"
    now_sql: str  # the database clock: epoch seconds as a float (leases read it, not the hosts')
    # What a read of the run's fence appends so that the transaction holds it until it commits:
    # PostgreSQL's READ COMMITTED lets another owner bump the epoch between a read and a write
    # (FOR SHARE waits for that bump and re-reads); SQLite's BEGIN IMMEDIATE serialises writers.
    fence_lock: str
    # What a SELECT of rows to claim appends so that several daemons claim disjoint rows without
    # waiting on each other (PostgreSQL); SQLite has one writer at a time and no row locks.
    skip_locked: str

    @property
    def sqlite(self) -> bool:
        return self.engine == "sqlite"

    def singleton(self, c: Any, name: str) -> None:
        """Make the caller's write transaction the only one doing `name` (retention, inbox expiry,
        rate-limit bookkeeping, the notify queue) until it commits, across every daemon sharing
        the database: on PostgreSQL, a lock on `name`'s row of `agentd_locks`, waited for. Only
        a role that may update that table (agentd's) can take it — an advisory lock's key anyone
        who can connect computes and holds. SQLite's BEGIN IMMEDIATE already serialises writers,
        so nothing more is needed there."""
        if self.sqlite:
            return
        key = singleton_key(name)
        locked = "SELECT lock_key FROM agentd_locks WHERE lock_key = ? FOR UPDATE"
        if c.execute(locked, (key,)).fetchone() is None:  # the first time `name` is locked
            # A second inserter waits on the first's uncommitted row: a lock already.
            c.execute(
                "INSERT INTO agentd_locks (lock_key) VALUES (?) ON CONFLICT DO NOTHING", (key,)
            )
            c.execute(locked, (key,))

    def try_singleton(self, c: Any, name: str) -> bool:
        """`singleton`, not waited for: False when another transaction holds `name` now (it
        is doing that work; the caller leaves it to it instead of waiting behind it)."""
        if self.sqlite:
            return True
        key = singleton_key(name)
        locked = "SELECT lock_key FROM agentd_locks WHERE lock_key = ? FOR UPDATE SKIP LOCKED"
        if c.execute(locked, (key,)).fetchone() is not None:
            return True
        if c.execute("SELECT 1 FROM agentd_locks WHERE lock_key = ?", (key,)).fetchone():
            return False  # another transaction holds it
        # Never taken yet: its row is inserted (another's first insert is waited for, once ever).
        c.execute("INSERT INTO agentd_locks (lock_key) VALUES (?) ON CONFLICT DO NOTHING", (key,))
        return c.execute(locked, (key,)).fetchone() is not None

    def jtext(self, col: str, path: str) -> str:
        """The JSON value at `path` (dotted: "nudge.topic") in the column `col`, as SQL text on
        PostgreSQL (SQLite's `->>` gives the value's own type: compare with `jnum` for numbers)."""
        keys = path.split(".")
        if self.sqlite:
            return f"{col} ->> '{path}'" if len(keys) == 1 else f"{col} ->> '$.{path}'"
        return f"{col} ->> '{path}'" if len(keys) == 1 else f"{col} #>> '{{{','.join(keys)}}}'"

    def jnum(self, col: str, path: str) -> str:
        """The JSON number at `path` in `col`, as a float (NULL when absent)."""
        return self.jtext(col, path) if self.sqlite else f"({self.jtext(col, path)})::float8"

    def jint(self, col: str, path: str) -> str:
        """The JSON integer at `path` in `col` (NULL when absent): sums stay integers."""
        return self.jtext(col, path) if self.sqlite else f"({self.jtext(col, path)})::bigint"

    def jlen(self, col: str, key: str) -> str:
        """The length of the JSON array under `key` in `col`; NULL when absent (or, on
        PostgreSQL, not an array: its jsonb_array_length raises on a scalar). Coalesce it."""
        if self.sqlite:
            return f"json_array_length({col}, '$.{key}')"
        item = f"{col} -> '{key}'"
        return f"CASE WHEN jsonb_typeof({item}) = 'array' THEN jsonb_array_length({item}) END"

    def jset(self, col: str, key: str) -> str:
        """`col` with `key` set to the next parameter, a JSON text (`json.dumps(value)`: a
        driver cannot type a bare parameter of PostgreSQL's polymorphic to_jsonb)."""
        if self.sqlite:
            return f"json_set({col}, '$.{key}', json(?))"
        return f"jsonb_set({col}, '{{{key}}}', CAST(? AS jsonb))"

    def has_member_but(self, col: str, text: str) -> str:
        """Whether the JSON object in `col` has a member whose value is not the string `text`."""
        assert text.isidentifier(), "a plain word, written into the SQL"
        if self.sqlite:
            return (
                f"EXISTS (SELECT 1 FROM json_each({col}) WHERE type != 'text' OR value != '{text}')"
            )
        return f"EXISTS (SELECT 1 FROM jsonb_each({col}) m WHERE m.value <> '\"{text}\"'::jsonb)"

    def in_list(self, expr: str) -> str:
        """`expr` is one of a list passed as one parameter (`list_param`), so a statement's text
        does not depend on the list's length."""
        return f"{expr} IN (SELECT value FROM json_each(?))" if self.sqlite else f"{expr} = ANY(?)"

    def list_param(self, values: Iterable[Any]) -> Any:
        """The parameter `in_list` reads: a JSON array for SQLite, a list (an array) for psycopg."""
        return json.dumps(list(values)) if self.sqlite else list(values)

    def greatest(self, *exprs: str) -> str:
        """The largest of non-NULL expressions (SQLite's scalar max() is NULL if any one is NULL,
        PostgreSQL's greatest() skips NULLs: give it none)."""
        return f"{'max' if self.sqlite else 'greatest'}({', '.join(exprs)})"

    def least(self, *exprs: str) -> str:
        """The smallest of non-NULL expressions (see `greatest`)."""
        return f"{'min' if self.sqlite else 'least'}({', '.join(exprs)})"

    def day_of(self, epoch: str) -> str:
        """The UTC day ('YYYY-MM-DD') of an epoch-seconds expression."""
        if self.sqlite:
            return f"date({epoch}, 'unixepoch')"
        return f"to_char(to_timestamp({epoch}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


def singleton_key(name: str) -> int:
    """The row of `agentd_locks` that stands for a singleton's `name`: a stable signed 64-bit
    number (PostgreSQL's bigint), the same in every process (Python's hash() is salted)."""
    digest = hashlib.blake2b(f"agentd:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# SQLite 3.40 has no unixepoch('subsec'): julianday is its sub-second clock.
SQLITE = Dialect(
    engine="sqlite", now_sql="((julianday('now') - 2440587.5) * 86400.0)", fence_lock="",
    skip_locked="",
)  # fmt: skip
POSTGRES = Dialect(
    engine="postgres", now_sql="extract(epoch from clock_timestamp())::float8",
    fence_lock=" FOR SHARE", skip_locked=" FOR UPDATE SKIP LOCKED",
)  # fmt: skip
