"""Copy a home's state from its SQLite file into an empty PostgreSQL database (`agentd store copy`):
every table of agentd's schema that holds state, in foreign-key order, in one transaction on the
target (all or nothing), ids kept and each identity sequence moved past them, then counted and
checksummed on both sides before that transaction commits.

The tables come from the two catalogues, never from a list kept here: a table added to the schema
is copied with no change to this module, and a table or column the two engines disagree on is
refused before anything is written. Not state, so not copied: each engine's bookkeeping (SQLite's
`sqlite_*`, PostgreSQL's `schema_migrations`) and `daemons` (the heartbeats of live daemons).

Values are converted by the target column's type (JSON text to jsonb, 0/1 to a boolean); a
table's checksum is a sum of row digests over one canonical form per type, so neither row order
nor jsonb's spacing and key order count. The source is read in one snapshot, and a write to it
meanwhile rolls the copy back; the target's triggers (rate_log, notify_queue) are off while rows
go in, since the rows they would add are copied themselves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

from agentd.db.backend import Backend
from agentd.db.conn import Conn
from agentd.errors import StateError

# Not state: the engines' own bookkeeping, and which daemons are alive right now.
SKIPPED = {
    "schema_migrations": "PostgreSQL's ledger of migrations: the target keeps its own",
    "daemons": "the heartbeats of live daemons: each daemon writes its own when it starts",
    "agentd_locks": "PostgreSQL's rows the singletons lock: no state in them",
}
IDLE_MS = 600_000  # the copy's own session: reading a slow source is not a frozen daemon
_MOD = 1 << 128


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # the target's type: "bigint", "double precision", "text", "jsonb", "boolean"
    identity: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class TableCopy:
    """One table copied: rows and checksum read from the source, and counted back on the target."""

    table: str
    rows: int
    checksum: str
    target_rows: int
    target_checksum: str

    @property
    def ok(self) -> bool:
        return self.rows == self.target_rows and self.checksum == self.target_checksum


@dataclass
class CopyReport:
    source: str
    target: str
    schema: int
    tables: list[TableCopy] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    sequences: dict[str, int] = field(default_factory=dict)  # "table.column" → next id
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


class TargetNotEmpty(StateError):
    """The target database holds rows or tables already: a copy goes into an empty one only."""


def postgres(url: str, home: Path) -> Backend:
    """The PostgreSQL database at `url` as a Backend (psycopg is imported here, not before)."""
    from agentd.db.postgres.backend import PostgresBackend

    return PostgresBackend(url, home)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_names(c: Conn) -> set[str]:
    """Every table of the database's schema, the engine's own included."""
    if c.dialect.sqlite:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        sql = (
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    return {str(r[0]) for r in c.execute(sql)}


def state_tables(c: Conn) -> set[str]:
    """The tables a copy carries: all but the engines' bookkeeping and SKIPPED."""
    return {t for t in table_names(c) if t not in SKIPPED and not t.startswith("sqlite_")}


def _columns(c: Conn, table: str) -> list[tuple[str, str, bool]]:
    if c.dialect.sqlite:
        rows = c.execute("SELECT name, type, 0 FROM pragma_table_info(?) ORDER BY cid", (table,))
    else:
        rows = c.execute(
            "SELECT column_name, data_type, is_identity = 'YES' FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            (table,),
        )
    return [(str(n), str(k).lower(), bool(i)) for n, k, i in rows]


def _foreign_keys(c: Conn) -> list[tuple[str, str]]:
    """(table, the table it references) on the PostgreSQL target, which enforces them."""
    rows = c.execute(
        "SELECT cl.relname, ref.relname FROM pg_constraint k"
        " JOIN pg_class cl ON cl.oid = k.conrelid JOIN pg_class ref ON ref.oid = k.confrelid"
        " WHERE k.contype = 'f' AND cl.relnamespace = current_schema()::regnamespace"
    )
    return [(str(a), str(b)) for a, b in rows]


def plan(source: Conn, target: Conn) -> list[Table]:
    """The tables to copy in foreign-key order (referenced before referencing), with the target's
    column types; refuses when the two catalogues disagree on a table or a column."""
    mine, theirs = state_tables(source), state_tables(target)
    if mine != theirs:
        only_source, only_target = sorted(mine - theirs), sorted(theirs - mine)
        raise StateError(
            "the two schemas differ (source only: "
            f"{', '.join(only_source) or 'none'}; target only: {', '.join(only_target) or 'none'});"
            " copy with the agentd that made the source, into an empty database"
        )
    tables: dict[str, Table] = {}
    for name in sorted(mine):
        want = [n for n, _, _ in _columns(source, name)]
        got = _columns(target, name)
        if sorted(want) != sorted(n for n, _, _ in got):
            raise StateError(
                f"table {name}: the source's columns ({', '.join(want)}) are not the target's"
                f" ({', '.join(n for n, _, _ in got)}); copy with the agentd that made the source"
            )
        tables[name] = Table(name, tuple(Column(n, k, i) for n, k, i in got))
    graph = TopologicalSorter({t: set() for t in tables})
    for table, ref in _foreign_keys(target):
        if table in tables and ref in tables and ref != table:
            graph.add(table, ref)
    graph.prepare()
    order: list[str] = []
    while graph.is_active():
        ready = sorted(graph.get_ready())  # a stable order among equals: tests read it
        order.extend(ready)
        graph.done(*ready)
    return [tables[t] for t in order]


def target_contents(target: Conn, known: Iterable[str]) -> tuple[dict[str, int], list[str]]:
    """What the target holds already: rows per table of agentd's (`known`; `daemons` counts, a
    daemon serving it is the worst case) and the names of tables agentd did not make. The rows
    of `agentd_locks` are no state: a daemon that started on the target, or this copy, made them."""
    names = table_names(target) - {"schema_migrations", "agentd_locks"}
    known = set(known) | set(SKIPPED)
    rows = {
        t: int(target.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0])
        for t in sorted(names & known)
    }
    return {t: n for t, n in rows.items() if n}, sorted(names - known)


def refuse_unless_empty(target: Conn, known: Iterable[str], label: str) -> None:
    rows, foreign = target_contents(target, known)
    if foreign:
        raise TargetNotEmpty(
            f"{label} holds tables agentd did not make ({', '.join(foreign[:8])}"
            f"{', …' if len(foreign) > 8 else ''}); copy into a database of its own, e.g."
            " `createdb agentd` and --to postgresql://…/agentd"
        )
    if rows:
        held = ", ".join(f"{t} {n:,}" for t, n in rows.items())
        raise TargetNotEmpty(
            f"{label} is not empty: it holds rows ({held}); a copy goes into an empty database"
            " only, so it never mixes two homes: copy into a new one (`createdb agentd2`), or"
            " drop this one's tables first if it is a failed or unwanted copy"
        )


# ── values ──────────────────────────────────────────────────────────────────────────────────
def _json(v: Any) -> Any:
    return None if v is None else json.dumps(json.loads(v), sort_keys=True, separators=(",", ":"))


_FORMS: dict[str, Callable[[Any], Any]] = {
    "jsonb": _json,
    "json": _json,
    "boolean": lambda v: None if v is None else bool(v),
    "double precision": lambda v: None if v is None else float(v),  # repr: exact
    "bigint": lambda v: None if v is None else int(v),
}


def _to_target(kind: str) -> Callable[[Any], Any]:
    """SQLite's value as the target's column takes it: 0/1 as a boolean, an integer as a float."""
    return _FORMS[kind] if kind in ("boolean", "double precision") else lambda v: v


def row_form(kinds: Sequence[str]) -> Callable[[Sequence[Any]], str]:
    """A row as one text, the same whichever engine it was read from (`kinds`: the target's
    column types): JSON parsed and written again with sorted keys, numbers by their type."""
    forms = [_FORMS.get(k, lambda v: v) for k in kinds]
    return lambda row: repr([f(v) for f, v in zip(forms, row, strict=True)])


def _digest(form: Callable[[Sequence[Any]], str], row: Sequence[Any]) -> int:
    digest = hashlib.blake2b(form(row).encode(), digest_size=16).digest()
    return int.from_bytes(digest, "big")


def _select(table: Table) -> str:
    return f"SELECT {', '.join(_q(c.name) for c in table.columns)} FROM {_q(table.name)}"


def checksum(c: Conn, table: Table) -> tuple[int, str]:
    """The table's rows and order-free checksum on `c` (either engine)."""
    form = row_form([col.kind for col in table.columns])
    count, total = 0, 0
    for row in c.execute(_select(table)):
        count, total = count + 1, (total + _digest(form, row)) % _MOD
    return count, f"{total:032x}"


def _copy_table(source: Conn, target: Conn, table: Table) -> tuple[int, str]:
    """Stream the table's rows from the source into the target (COPY), summing their digests."""
    from agentd.db.postgres.bulk import copy_in  # psycopg: only once there is a target

    kinds = [c.kind for c in table.columns]
    convert, form = [_to_target(k) for k in kinds], row_form(kinds)
    total = 0

    def rows() -> Iterator[list[Any]]:
        nonlocal total
        for row in source.execute(_select(table)):
            total = (total + _digest(form, row)) % _MOD
            yield [f(v) for f, v in zip(convert, row, strict=True)]

    count = copy_in(target, table.name, [c.name for c in table.columns], rows())
    return count, f"{total:032x}"


def _triggered_tables(target: Conn) -> list[str]:
    rows = target.execute(
        "SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace"
    )
    return sorted(str(r[0]) for r in rows)


def _move_sequences(target: Conn, tables: list[Table]) -> dict[str, int]:
    """Each identity sequence set past the largest copied id: new rows get new ids."""
    moved: dict[str, int] = {}
    for table in tables:
        for col in table.columns:
            if not col.identity:
                continue
            row = target.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), max({_q(col.name)}))"
                f" FROM {_q(table.name)} HAVING max({_q(col.name)}) IS NOT NULL",
                (_q(table.name), col.name),
            ).fetchone()
            if row is not None:
                moved[f"{table.name}.{col.name}"] = int(row[0]) + 1
    return moved


# ── the copy ────────────────────────────────────────────────────────────────────────────────
def copy(
    source: Backend, target: Backend, on_table: Callable[[TableCopy], None] | None = None
) -> CopyReport:
    """Copy `source` (at this agentd's schema) into the empty `target`, migrated here first.
    Refuses a source at another schema version and a target that is not empty, before writing
    anything; a copy that fails or does not verify is rolled back (the migrated, empty schema
    stays: a second try accepts it)."""
    started = time.monotonic()
    src = source.connect(readonly=True, wal=False)
    try:
        tgt = target.connect()
        try:
            report = _copy(source, src, target, tgt, on_table)
        finally:
            tgt.close()
    finally:
        src.close()
    report.seconds = time.monotonic() - started
    return report


def _copy(
    source: Backend,
    src: Conn,
    target: Backend,
    tgt: Conn,
    on_table: Callable[[TableCopy], None] | None,
) -> CopyReport:
    try:
        have = source.schema_version(src)
        known = state_tables(src)
    except source.Error as e:
        raise source.translate(e) from None
    _check_version(source, have)
    try:
        refuse_unless_empty(tgt, known, target.label)
        target.migrate(tgt)
        tables = plan(src, tgt)
    except target.Error as e:
        raise target.translate(e) from None
    report = CopyReport(source.label, target.label, have)
    report.skipped = {
        t: SKIPPED[t] for t in sorted(table_names(src) | table_names(tgt)) if t in SKIPPED
    }
    before = source.data_version(src)
    src.execute("BEGIN")  # one snapshot of the source: a CLI's write meanwhile is not half-seen
    try:
        target.begin_write(tgt)
        try:
            _fill(src, tgt, target, tables, report, on_table)
            src.execute("ROLLBACK")  # the snapshot ends: did a command write since it began?
            if source.data_version(src) != before:
                raise StateError(
                    f"{source.label} changed while it was copied (a command wrote to it); the"
                    " copy was rolled back, nothing was written: copy again"
                )
            tgt.execute("COMMIT")
        except BaseException as e:
            with contextlib.suppress(target.Error):  # a lost connection rolled back already
                if target.in_transaction(tgt):
                    tgt.execute("ROLLBACK")
            if isinstance(e, target.Error):
                raise target.translate(e) from None
            raise
    except source.Error as e:
        raise source.translate(e) from None
    finally:
        if source.in_transaction(src):
            src.execute("ROLLBACK")
    return report


def _check_version(source: Backend, have: int) -> None:
    if have < source.latest:
        raise StateError(
            f"{source.label} is at schema version {have}, older than this agentd's ({source.latest});"
            f" a copy never changes its source, so bring it up to date first: run `agentd --home"
            f" {source.home} init` (it keeps the config and the data) or start `agentd serve` once,"
            " stop it, then copy again"
        )
    if have > source.latest:
        raise StateError(
            f"{source.label} is at schema version {have}, newer than this agentd knows"
            f" ({source.latest}); copy it with the agentd that made it (upgrade this one)"
        )


def _fill(
    src: Conn,
    tgt: Conn,
    target: Backend,
    tables: list[Table],
    report: CopyReport,
    on_table: Callable[[TableCopy], None] | None,
) -> None:
    # This session holds no lock a daemon waits for (the target is empty), and it is idle in its
    # transaction whenever it reads the source: a daemon's short idle limit would cut it off.
    tgt.execute(f"SET LOCAL idle_in_transaction_session_timeout = {IDLE_MS}")
    # One copy into a database at a time: a second waits, then refuses (it finds rows). A row
    # lock of agentd's own, not an advisory lock any role that may connect could hold.
    tgt.dialect.singleton(tgt, "store_copy")
    refuse_unless_empty(tgt, [t.name for t in tables], target.label)
    triggered = _triggered_tables(tgt)
    for name in triggered:  # DDL inside the transaction: it rolls back with it
        tgt.execute(f"ALTER TABLE {_q(name)} DISABLE TRIGGER USER")
    for table in tables:
        try:
            rows, digest = _copy_table(src, tgt, table)
        except target.Error as e:  # a value the target refuses (a NUL in a text, bad JSON)
            raise StateError(
                f"table {table.name}: {target.translate(e)}; the copy was rolled back, nothing"
                " was written"
            ) from None
        target_rows, target_digest = checksum(tgt, table)
        done = TableCopy(table.name, rows, digest, target_rows, target_digest)
        report.tables.append(done)
        if on_table is not None:
            on_table(done)
        if not done.ok:
            raise StateError(
                f"table {table.name}: the target reads {target_rows:,} rows (checksum"
                f" {target_digest[:12]}) where the source has {rows:,} ({digest[:12]}); the copy"
                " was rolled back, nothing was written"
            )
    for name in triggered:
        tgt.execute(f"ALTER TABLE {_q(name)} ENABLE TRIGGER USER")
    report.sequences = _move_sequences(tgt, tables)
