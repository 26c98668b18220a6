"""World snapshots: what an agent's sources saw at a moment, stored apart from run state so the
harness can tell what changed between looks without a model."""

from __future__ import annotations

import json

from agentd.db import stamp
from agentd.db.conn import Conn
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
        "INSERT INTO world (agent, run_id, taken_at, data, changes) VALUES (?, ?, ?, ?, ?)",
        (agent, run_id, stamp.now(c), json_col(data), json_col(changes)),
    )
    return int(cur.lastrowid or 0)


def get_snapshot(c: Conn, snapshot_id: int) -> JSON:
    row = c.execute("SELECT data FROM world WHERE snapshot_id = ?", (snapshot_id,)).fetchone()
    if row is None:
        raise NotFound(f"no world snapshot {snapshot_id}")
    return dict(json.loads(row[0]))
