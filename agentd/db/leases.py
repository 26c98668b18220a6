"""Who drives which run: the daemons serving the database and the leases they hold on runs.

A daemon registers itself as an owner (host:pid:random, new at every start) and takes the lease of
a run by bumping its epoch, which fences every later write of a previous owner (DESIGN §7). Lease
times are on the database's clock, never a host's. On a store several daemons share (PostgreSQL),
a daemon claims only runs nobody holds — started by the CLI, or whose lease lapsed — with SKIP
LOCKED, and renews all of its leases with one statement; on SQLite the home lock makes the one
daemon the only owner, and at start it takes every running run.

Write functions expect to be called inside a write transaction (see agentd/db/queries.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.db.conn import Conn, returned_id
from agentd.errors import NotFound

# A daemon's row is kept this long after it stopped or went silent (`agentd status` shows the
# recent past), then pruned when another daemon starts.
FORGET_DAEMON_S = 7 * 86400.0


@dataclass(frozen=True)
class DaemonRow:
    """One daemon serving the database, as `agentd status` lists it."""

    owner: str
    host: str
    pid: int
    version: str
    lease_s: float
    started_at: float
    renewed_at: float
    stopped_at: float | None
    runs_held: int
    silent_s: float  # database seconds since its last renewal
    config_sha256: str | None = None  # the config it runs (None: an older agentd's row)
    config_loaded_s_ago: float | None = None  # database seconds since it loaded that config

    @property
    def live(self) -> bool:
        """Renewed within its lease and not stopped: its runs are its own."""
        return self.stopped_at is None and self.silent_s < self.lease_s


# ── the daemons ──────────────────────────────────────────────────────────────────────────────────


def register(c: Conn, *, owner: str, host: str, pid: int, version: str, lease_s: float) -> None:
    """Record a starting daemon (and forget those long gone)."""
    now = c.dialect.now_sql
    c.execute(
        "DELETE FROM daemons WHERE coalesce(stopped_at, renewed_at) < " + now + " - ?",
        (FORGET_DAEMON_S,),
    )
    c.execute(
        "INSERT INTO daemons (owner, host, pid, version, lease_s, started_at, renewed_at)"
        f" VALUES (?, ?, ?, ?, ?, {now}, {now})",
        (owner, host, pid, version, lease_s),
    )


def loaded_config(c: Conn, owner: str, sha256_hex: str) -> None:
    """`owner` runs the config whose file's bytes hash to `sha256_hex` (at start, each reload)."""
    c.execute(
        f"UPDATE daemons SET config_sha256 = ?, config_loaded_at = {c.dialect.now_sql}"
        " WHERE owner = ?",
        (sha256_hex, owner),
    )


def stopped(c: Conn, owner: str, *, release: bool) -> int:
    """Record a clean stop; with `release`, hand the runs, check-ins and messages still claimed
    back at once (another daemon takes them at its next claim instead of after the lease).
    Returns the runs released."""
    c.execute(f"UPDATE daemons SET stopped_at = {c.dialect.now_sql} WHERE owner = ?", (owner,))
    return release_all(c, owner) if release else 0


def release_all(c: Conn, owner: str) -> int:
    """Hand back every run, check-in and message `owner` holds: another daemon takes them at
    its next claim. Returns the runs released."""
    for table in ("checkins", "outbox"):  # claimed like runs (db/checkins.py, db/outbox.py)
        c.execute(
            f"UPDATE {table} SET claimed_by = NULL, claim_expires_at = NULL WHERE claimed_by = ?",
            (owner,),
        )
    return release_runs(c, owner)


def release_runs(c: Conn, owner: str) -> int:
    """Hand back the running runs `owner` holds; returns how many."""
    return c.execute(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL"
        " WHERE lease_owner = ? AND status = 'running'",
        (owner,),
    ).rowcount


def daemons(c: Conn) -> list[DaemonRow]:
    """Every daemon still remembered, the newest first, with the runs each holds."""
    rows = c.execute(
        "SELECT d.owner, d.host, d.pid, d.version, d.lease_s, d.started_at, d.renewed_at,"
        " d.stopped_at, (SELECT count(*) FROM runs r WHERE r.lease_owner = d.owner"
        f" AND r.status = 'running'), {c.dialect.now_sql} - d.renewed_at, d.config_sha256,"
        f" {c.dialect.now_sql} - d.config_loaded_at FROM daemons d ORDER BY d.started_at DESC"
    ).fetchall()
    return [_daemon_row(r) for r in rows]


def _daemon_row(r: Any) -> DaemonRow:
    return DaemonRow(
        owner=r[0], host=r[1], pid=int(r[2]), version=r[3], lease_s=float(r[4]),
        started_at=float(r[5]), renewed_at=float(r[6]),
        stopped_at=None if r[7] is None else float(r[7]), runs_held=int(r[8]),
        silent_s=max(0.0, float(r[9])), config_sha256=r[10],
        config_loaded_s_ago=None if r[11] is None else max(0.0, float(r[11])),
    )  # fmt: skip


# ── leases ───────────────────────────────────────────────────────────────────────────────────────


def renew(c: Conn, owner: str, lease_s: float) -> list[tuple[int, int]]:
    """Extend every lease `owner` holds by `lease_s` from now (one statement), and its heartbeat.

    Returns the (run_id, epoch) pairs still held: a run the daemon drives that is missing was
    taken over (its lease had lapsed) or finished by someone else, and must be let go.
    """
    now = c.dialect.now_sql
    c.execute(f"UPDATE daemons SET renewed_at = {now} WHERE owner = ?", (owner,))
    rows = c.execute(
        f"UPDATE runs SET lease_expires_at = {now} + ? WHERE lease_owner = ?"
        " AND status = 'running' RETURNING run_id, lease_epoch",
        (lease_s, owner),
    ).fetchall()
    return sorted((int(r[0]), int(r[1])) for r in rows)


def taken(c: Conn, owner: str, run_ids: set[int]) -> list[int]:
    """Which of `run_ids` (the runs a daemon drives) another daemon holds now."""
    if not run_ids:
        return []
    rows = c.execute(
        f"SELECT run_id FROM runs WHERE {c.dialect.in_list('run_id')} AND status = 'running'"
        " AND (lease_owner IS NULL OR lease_owner != ?)",
        (c.dialect.list_param(sorted(run_ids)), owner),
    )
    return sorted(int(r[0]) for r in rows)


def claim_free(
    c: Conn, owner: str, lease_s: float, *, lapsed: bool, limit: int = 100
) -> list[tuple[int, int]]:
    """Take the lease on running runs nobody holds: started by the CLI (no owner) and, with
    `lapsed`, those whose lease ran out on the database's clock (their daemon died, froze or lost
    the database). Returns (run_id, new epoch) pairs.

    The candidates are locked SKIP LOCKED, so daemons claiming at once take disjoint runs, and
    the write repeats the condition (DESIGN §7: the predicate in the write).
    """
    d = c.dialect
    free = "lease_owner IS NULL" + (f" OR lease_expires_at < {d.now_sql}" if lapsed else "")
    # Picked (and locked) first, then updated by id: as `UPDATE … WHERE run_id IN (SELECT … LIMIT
    # ? FOR UPDATE SKIP LOCKED)` PostgreSQL may plan a semi join that runs the subquery again for
    # each row, and the LIMIT then bounds nothing (one daemon took all 40 runs, limit 20).
    picked = [
        int(r[0])
        for r in c.execute(
            f"SELECT run_id FROM runs WHERE status = 'running' AND ({free})"
            f" ORDER BY run_id LIMIT ?{d.skip_locked}",
            (limit,),
        )
    ]
    if not picked:
        return []
    rows = c.execute(
        f"UPDATE runs SET lease_owner = ?, lease_expires_at = {d.now_sql} + ?,"
        f" lease_epoch = lease_epoch + 1 WHERE {d.in_list('run_id')}"
        f" AND status = 'running' AND ({free}) RETURNING run_id, lease_epoch",
        (owner, lease_s, d.list_param(picked)),
    ).fetchall()
    return sorted((int(r[0]), int(r[1])) for r in rows)


def free_claims_of_the_gone(c: Conn) -> int:
    """Let go of the check-ins and messages claimed by daemons that stopped or went silent past
    their lease (db/checkins.py, db/outbox.py claim them for minutes, the length of a model call
    or a send): another daemon takes them now instead of when the claim runs out. A frozen daemon
    thawed later finds its claim gone and its writes refused, as with a run. Returns the rows."""
    live = (
        "SELECT owner FROM daemons WHERE stopped_at IS NULL"
        f" AND renewed_at + lease_s >= {c.dialect.now_sql}"
    )
    return sum(
        c.execute(
            f"UPDATE {table} SET claimed_by = NULL, claim_expires_at = NULL"
            f" WHERE claimed_by IS NOT NULL AND claimed_by NOT IN ({live})"
        ).rowcount
        for table in ("checkins", "outbox")
    )


def claim_running(c: Conn, owner: str, lease_s: float) -> list[tuple[int, int]]:
    """Take the lease on every `running` run: the start of the only daemon a store can have
    (SQLite, under the home lock), whose previous owner is dead whatever its lease says.

    Bumping the epoch fences any late write from a previous owner of the same run.
    """
    rows = c.execute(
        f"UPDATE runs SET lease_owner = ?, lease_expires_at = {c.dialect.now_sql} + ?,"
        " lease_epoch = lease_epoch + 1 WHERE status = 'running' RETURNING run_id, lease_epoch",
        (owner, lease_s),
    ).fetchall()
    return sorted((int(r[0]), int(r[1])) for r in rows)


def held_run_ids(c: Conn, owner: str) -> list[int]:
    """The running runs whose lease `owner` holds."""
    rows = c.execute(
        "SELECT run_id FROM runs WHERE lease_owner = ? AND status = 'running'", (owner,)
    )
    return [int(r[0]) for r in rows]


def claim_run(c: Conn, run_id: int, owner: str, lease_s: float) -> int:
    """Take the lease on one run (one this transaction started, or our own orphan); returns its
    new epoch."""
    epoch = returned_id(
        c.execute(
            f"UPDATE runs SET lease_owner = ?, lease_expires_at = {c.dialect.now_sql} + ?,"
            " lease_epoch = lease_epoch + 1 WHERE run_id = ? RETURNING lease_epoch",
            (owner, lease_s, run_id),
        )
    )
    if epoch is None:
        raise NotFound(f"no run {run_id}")
    return epoch


def reclaim(c: Conn, run_id: int, owner: str, lease_s: float) -> int | None:
    """Take our own orphan again (a run we hold that no task drives) under a new epoch; None when
    it is no longer ours or no longer running."""
    return returned_id(
        c.execute(
            f"UPDATE runs SET lease_expires_at = {c.dialect.now_sql} + ?,"
            " lease_epoch = lease_epoch + 1 WHERE run_id = ? AND lease_owner = ?"
            " AND status = 'running' RETURNING lease_epoch",
            (lease_s, run_id, owner),
        )
    )
