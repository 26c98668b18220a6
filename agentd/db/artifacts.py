"""Artifacts: every version a build run drafted, with the judge's verdict once judged.

An artifact is named by its build run (`artifact 12` is what build run 12 makes); its versions
count from 1. A version is written in the transaction that journals its GENERATE step, and its
verdict in the one that journals its JUDGE step, so the table never disagrees with the journal.
"""

from __future__ import annotations

import json
from typing import Any

from agentd.db import stamp
from agentd.db.conn import Conn
from agentd.db.queries import create_run
from agentd.db.rows import json_col
from agentd.errors import NotFound
from agentd.models import JSON, from_ts

BUILD_TRIGGER = "build"  # runs.trigger of a build run
MAX_LIVE_BUILDS = 3  # builds of one goal under way at once that a run may start
_COLS = (
    "run_id, version, goal_id, seq, request, text, chars, status, verdict, model, created_at,"
    " judged_at"
)


def _row(r: tuple[Any, ...]) -> JSON:
    keys = [k.strip() for k in _COLS.split(",")]
    out = dict(zip(keys, r, strict=True))
    out["verdict"] = None if out["verdict"] is None else json.loads(out["verdict"])
    out["created_at"], out["judged_at"] = from_ts(out["created_at"]), from_ts(out["judged_at"])
    return out


def create_build(
    c: Conn, *, goal_id: int, agent: str, spec: JSON, parent: JSON | None = None
) -> int:
    """A new build run (running, with its START step carrying the spec) — one transaction."""
    data = {"build": spec, **({"parent": parent} if parent else {})}
    return create_run(c, goal_id=goal_id, agent=agent, trigger=BUILD_TRIGGER, data=data)


def live_builds(c: Conn, goal_id: int) -> int:
    return int(
        c.execute(
            "SELECT count(*) FROM runs WHERE goal_id = ? AND trigger = ?"
            " AND status IN ('running', 'waiting')",
            (goal_id, BUILD_TRIGGER),
        ).fetchone()[0]
    )


def add_version(
    c: Conn,
    *,
    run_id: int,
    goal_id: int,
    version: int,
    seq: int,
    request: str,
    text: str,
    chars: int,
    model: str,
) -> None:
    c.execute(
        f"INSERT INTO artifacts ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 'draft', NULL, ?, ?, NULL)",
        (run_id, version, goal_id, seq, request, text, chars, model, stamp.now(c)),
    )


def judge_version(c: Conn, run_id: int, version: int, verdict: JSON, passed: bool) -> None:
    cur = c.execute(
        "UPDATE artifacts SET verdict = ?, status = ?, judged_at = ? WHERE run_id = ? AND version = ?",
        (json_col(verdict), "passed" if passed else "failed", stamp.now(c), run_id, version),
    )
    if cur.rowcount != 1:
        raise NotFound(f"artifact {run_id} has no version {version}")


def get_version(c: Conn, run_id: int, version: int | None = None) -> JSON:
    """One version (the latest when `version` is None); NotFound names what exists."""
    if version is None:
        row = c.execute(
            f"SELECT {_COLS} FROM artifacts WHERE run_id = ? ORDER BY version DESC LIMIT 1",
            (run_id,),
        ).fetchone()
    else:
        row = c.execute(
            f"SELECT {_COLS} FROM artifacts WHERE run_id = ? AND version = ?", (run_id, version)
        ).fetchone()
    if row is None:
        n = versions(c, run_id)
        if n:
            raise NotFound(f"artifact {run_id} has versions 1–{n}, not {version}")
        raise NotFound(f"no artifact {run_id}; see `agentd artifact list`")
    return _row(row)


def versions(c: Conn, run_id: int) -> int:
    return int(
        c.execute("SELECT count(*) FROM artifacts WHERE run_id = ?", (run_id,)).fetchone()[0]
    )


def list_artifacts(c: Conn, goal_id: int | None = None, limit: int = 50) -> list[JSON]:
    """Build runs, newest first, each with its latest version (if any) and the run's status."""
    sql = (
        "SELECT r.run_id, r.goal_id, r.status, r.summary, r.created_at, r.updated_at,"
        f" coalesce({c.dialect.jtext('s.data', 'build.request')},"
        " (SELECT request FROM artifacts a WHERE a.run_id = r.run_id LIMIT 1)),"
        " (SELECT max(version) FROM artifacts a WHERE a.run_id = r.run_id),"
        " (SELECT status FROM artifacts a WHERE a.run_id = r.run_id ORDER BY version DESC LIMIT 1)"
        " FROM runs r LEFT JOIN steps s ON s.run_id = r.run_id AND s.seq = 1"
        " WHERE r.trigger = ?"
    )
    params: list[Any] = [BUILD_TRIGGER]
    if goal_id is not None:
        sql += " AND r.goal_id = ?"
        params.append(goal_id)
    sql += " ORDER BY r.run_id DESC LIMIT ?"
    params.append(limit)
    out = []
    for r in c.execute(sql, params):
        out.append(
            {
                "artifact": r[0], "goal_id": r[1], "run_status": r[2], "summary": r[3],
                "created_at": from_ts(r[4]), "updated_at": from_ts(r[5]), "request": r[6] or "",
                "versions": r[7] or 0, "status": r[8] or "none",
            }
        )  # fmt: skip
    return out


def all_versions(c: Conn, run_id: int) -> list[JSON]:
    return [
        _row(r)
        for r in c.execute(
            f"SELECT {_COLS} FROM artifacts WHERE run_id = ? ORDER BY version", (run_id,)
        )
    ]
