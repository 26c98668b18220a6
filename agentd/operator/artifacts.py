"""What builds made, as `agentd artifact list|show|diff` reads it: each build with its latest
verdict, one version with the request and requirements it was judged against, two versions to
compare. One read transaction each."""

from __future__ import annotations

from typing import Any

from agentd.db import artifacts as qa
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import NotFound
from agentd.models import JSON, Run, StepKind


def listed(store: SyncStore, goal_id: int | None, limit: int) -> list[JSON]:
    """Builds, newest first (only `goal_id`'s when given), each with its latest version."""
    return store.read(lambda c: qa.list_artifacts(c, goal_id, limit))


def _plan(c: Any, run_id: int, art: JSON | None) -> tuple[str, list[JSON]]:
    """The build's request and its requirements (as fixed by its PLAN step; once its journal has
    aged out, as the version and its verdict recorded them)."""
    steps = q.list_steps(c, run_id)
    start_data = steps[0].data.get("build", {}) if steps else {}
    plans = [s for s in steps if s.kind == StepKind.PLAN and "requirements" in s.data]
    reqs = list(plans[-1].data["requirements"]) if plans else []
    verdict = (art or {}).get("verdict") or {}
    if not reqs and verdict:
        keys = ("id", "text", "source")
        reqs = [{k: f[k] for k in keys} for f in verdict.get("findings", []) if f["id"] != "size"]
    if not reqs:
        reqs = [
            {"id": f"R{i}", "text": t, "source": "operator"}
            for i, t in enumerate(start_data.get("requirements", []), 1)
        ]
    return str(start_data.get("request") or (art or {}).get("request", "")), reqs


def shown(
    store: SyncStore, artifact: int, version: int | None
) -> tuple[Run, JSON | None, int, str, list[JSON]]:
    """A build's run, its `version` (the latest when None; None while it has drafted nothing),
    how many versions it has, and its request and requirements."""

    def read(c: Any) -> tuple[Run, JSON | None, int, str, list[JSON]]:
        run = q.get_run(c, artifact)
        if run.trigger != qa.BUILD_TRIGGER:
            raise NotFound(f"run {artifact} is not a build; see `agentd artifact list`")
        of = qa.versions(c, artifact)
        art = qa.get_version(c, artifact, version) if of or version else None
        return run, art, of, *_plan(c, artifact, art)

    return store.read(read)


def compared(
    store: SyncStore, artifact: int, old: int | None, new: int | None
) -> tuple[JSON, JSON]:
    """Two versions of a build: `new` (default: the latest) and `old` (default: the one before)."""

    def read(c: Any) -> tuple[JSON, JSON]:
        b = qa.get_version(c, artifact, new)
        before = old if old is not None else int(b["version"]) - 1
        if before < 1:
            raise NotFound(f"artifact {artifact} has one version; nothing to compare")
        return qa.get_version(c, artifact, before), b

    return store.read(read)
