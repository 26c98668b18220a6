"""`agentd backup`: a consistent copy of a live database through SQLite's online backup API.

The copy is taken from one read snapshot (a read transaction held on the source for the whole
backup), so it is consistent while the daemon keeps committing, and the daemon is never blocked:
in WAL mode readers and the writer do not wait for each other. The copy is written beside the
target under a temporary name, checked (`PRAGMA quick_check`), switched out of WAL (one
self-contained file that opens on a read-only mount), and only then renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentd.db import safety
from agentd.db.sqlite import safety as sqlite_safety
from agentd.db.sqlite.connection import connect, translate, uri
from agentd.db.sqlite.schema import version
from agentd.errors import Refused, StateError

PAGES_PER_STEP = 1024  # 4 MiB at the default page size: progress for big files, few steps
COUNTED = ("goals", "runs", "steps", "inbox", "events")


@dataclass(frozen=True)
class Backup:
    """What `agentd backup` made: where, how big, how long, and what it holds."""

    path: str
    bytes: int
    pages: int
    seconds: float
    schema_version: int
    integrity: str
    counts: dict[str, int]


Progress = Callable[[int, int], None]  # (pages copied, pages in all)


def backup(source: Path, target: Path, *, force: bool, progress: Progress | None = None) -> Backup:
    """Copy the database at `source` to `target` (refused if it exists, unless `force`)."""
    safety.check_not_lost(source)
    if not source.exists():
        raise StateError(f"{source}: no database to back up")
    live = source.resolve()
    if target.resolve() in {
        live,
        live.with_name(f"{live.name}-wal"),
        live.with_name(f"{live.name}-shm"),
    }:
        raise Refused(f"{target} is the live database; back it up to another file")
    if target.is_dir():
        raise Refused(
            f"{target} is a directory; give the backup's file name, e.g. {target}/agentd.db"
        )
    if target.exists() and not force:
        raise Refused(f"{target} already exists; choose a new name, or replace it with --force")
    if not target.parent.is_dir():
        raise StateError(f"{target.parent}: no such directory")
    started = time.monotonic()
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        _copy(source, partial, progress)
        result = _inspect(partial)
        partial.replace(target)
    except sqlite3.Error as e:
        raise translate(e, source) from None
    except OSError as e:
        raise StateError(f"{target}: cannot write the backup: {e.strerror or e}") from None
    finally:
        for leftover in (partial, partial.with_name(partial.name + "-journal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return Backup(
        path=str(target),
        bytes=target.stat().st_size,
        pages=result[0],
        seconds=round(time.monotonic() - started, 3),
        schema_version=result[1],
        integrity="ok",
        counts=result[2],
    )


def _copy(source: Path, partial: Path, progress: Progress | None) -> None:
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the copy is private too
    os.close(fd)
    src = connect(source, readonly=True)
    dst = sqlite3.connect(partial, isolation_level=None)
    try:
        # One snapshot for the whole copy: without it, every commit the daemon makes between two
        # steps would restart the backup, and a busy daemon would keep it from ever finishing.
        src.execute("BEGIN")
        src.execute("SELECT count(*) FROM sqlite_master").fetchone()

        def report(status: int, remaining: int, total: int) -> None:
            if progress is not None:
                progress(total - remaining, total)

        src.backup(dst, pages=PAGES_PER_STEP, progress=report)
        src.execute("COMMIT")
        dst.execute("PRAGMA journal_mode = DELETE")  # self-contained: no -wal, no -shm
    finally:
        src.close()
        dst.close()


def _inspect(path: Path) -> tuple[int, int, dict[str, int]]:
    """Check the copy as a restore would meet it: integrity, schema version, row counts."""
    conn = sqlite3.connect(uri(path, readonly=True), uri=True, isolation_level=None)
    try:
        sqlite_safety.quick_check(conn, path)
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        counts = {
            t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in COUNTED
            if t in tables
        }
        return pages, version(conn), counts
    finally:
        conn.close()
