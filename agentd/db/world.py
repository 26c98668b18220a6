"""World snapshots: what an agent's sources saw at a moment, stored apart from run state so the
harness can tell what changed between looks without a model."""

from __future__ import annotations

import json

from agentd.db import stamp
from agentd.db.conn import Conn, new_id
from agentd.db.rows import json_col
from agentd.errors import NotFound
from agentd.models import JSON


def last_snapshot(c: Conn, agent: str) -> tuple[int, JSON] | None:
    row = c.execute(
        "SELECT snapshot_id, data FROM world WHERE agent = ? ORDER BY snapshot_id DESC LIMIT 1",
        (agent,),
    ).fetchone()
    return None if row is None else (int(row[0]), json.loads(row[1]))


def add_snapshot(c: Conn, agent: str, run_id: int | None, data: JSON, changes: JSON) -> int:
    cur = c.execute(
        "INSERT INTO world (agent, run_id, taken_at, data, changes) VALUES (?, ?, ?, ?, ?)"
        " RETURNING snapshot_id",
        (agent, run_id, stamp.now(c), json_col(data), json_col(changes)),
    )
    return new_id(cur)


def get_snapshot(c: Conn, snapshot_id: int) -> JSON:
    row = c.execute("SELECT data FROM world WHERE snapshot_id = ?", (snapshot_id,)).fetchone()
    if row is None:
        raise NotFound(f"no world snapshot {snapshot_id}")
    return dict(json.loads(row[0]))


def last_healthy_at(c: Conn, agent: str, source: str, before: float) -> float | None:
    """When `agent` last saw `source` healthy (`ok` and no broken check) in a look taken before
    `before` (epoch seconds); None when no such look is kept. Walks back from `before` by time."""
    if '"' in source or "\\" in source:
        return None  # a name a JSON path cannot quote: no answer rather than a wrong one
    at = f'$."{source}"'
    row = c.execute(
        "SELECT taken_at FROM world WHERE agent = ? AND taken_at < ?"
        " AND (data ->> ?) = 1 AND coalesce(data ->> ?, 0) = 0"
        " ORDER BY taken_at DESC LIMIT 1",
        (agent, before, f"{at}.ok", f"{at}.check_failed"),
    ).fetchone()
    return None if row is None else float(row[0])
