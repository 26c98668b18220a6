"""Runs as the operator reads them beside goals.py's `run_details`: one run, a build's versions
with the judge's verdicts, and what the model calls cost (`agentd usage`). One read each."""

from __future__ import annotations

from typing import Any

from agentd.db import accounting
from agentd.db import artifacts as qa
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import JSON, Run, Step


def get_run(store: SyncStore, run_id: int) -> Run:
    """A run (NotFound names `agentd runs list`)."""
    return store.read(lambda c: q.get_run(c, run_id))


def build_versions(store: SyncStore, run_id: int) -> tuple[Run, list[JSON] | None]:
    """A run and, when it is a build, its versions, each with its text and the judge's verdict
    (newest last); None when the run is not a build."""

    def read(c: Any) -> tuple[Run, list[JSON] | None]:
        run = q.get_run(c, run_id)
        if run.trigger != qa.BUILD_TRIGGER:
            return run, None
        return run, qa.all_versions(c, run_id)

    return store.read(read)


def usage(store: SyncStore, since: float) -> list[JSON]:
    """Model calls, tokens and cost by goal, model and UTC day since `since` (a timestamp)."""
    return [dict(r) for r in store.read(lambda c: accounting.usage(c, since))]


def list_runs(
    store: SyncStore, *, goal_id: int | None = None, status: str | None = None, limit: int = 100
) -> list[Run]:
    """Runs, newest first: only `goal_id`'s, only those with `status`, at most `limit`."""
    return store.read(lambda c: q.list_runs(c, goal_id=goal_id, status=status, limit=limit))


def steps_of(store: SyncStore, run_id: int) -> list[Step]:
    """A run's journal, oldest step first."""
    return store.read(lambda c: q.list_steps(c, run_id))


def world_snapshots(store: SyncStore) -> int:
    """How many snapshots of the world the watchers have recorded (0: none has looked yet)."""
    return int(store.read(lambda c: c.execute("SELECT count(*) FROM world").fetchone()[0]))
