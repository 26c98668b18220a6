"""The evidence behind an inbox item, gathered for `agentd.views.evidence`: the world the item was
raised in (an approval keeps it; otherwise the run's last look before the item), the run's
journal, and from the world's history when each failing source was last seen healthy.
`for_item` works inside a transaction (the notification planner's), `of_item` on a store.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.conn import Conn
from agentd.db.store import SyncStore
from agentd.errors import NotFound
from agentd.models import JSON, InboxItem, Step, StepKind
from agentd.text import iso
from agentd.views import evidence as ev


def world_of(c: Conn, item: InboxItem, steps: list[Step]) -> JSON:
    """The snapshot an item was raised in: the approval's own, else the last look of its run at
    or before the item's creation; `{}` when there is none (retention may have pruned it)."""
    kept = item.data.get("world")
    if isinstance(kept, dict):
        return kept
    looks = [
        s for s in steps
        if s.kind == StepKind.OBSERVE and s.created_at <= item.created_at
        and isinstance(s.data.get("snapshot_id"), int)
    ]  # fmt: skip
    if not looks:
        return {}
    try:
        return worlds.get_snapshot(c, looks[-1].data["snapshot_id"])
    except NotFound:
        return {}


def healthy_until(c: Conn, agent: str, world: JSON) -> dict[str, str]:
    """For each source `world` sees failing or broken: the time (ISO 8601) of the agent's last
    look that saw it healthy, before its stretch began; a source with none kept is left out."""
    # Here, not at the top: `inbox list` imports this module, and the sources package (asyncio,
    # ssl, pydantic) is only needed to show one item (tests/cli/test_cli_startup.py).
    from agentd.config import CHECK_FAILED, UNHEALTHY
    from agentd.sources import state_of

    found: dict[str, str] = {}
    for name, obs in world.items():
        if not isinstance(obs, dict) or state_of(obs) not in (UNHEALTHY, CHECK_FAILED):
            continue
        if state_of(obs) == UNHEALTHY and obs.get("episode") == 1:
            continue  # the first stretch ever seen: no healthy look to find (a whole-history walk)
        try:
            since = datetime.fromisoformat(str(obs.get("since")).replace("Z", "+00:00"))
        except ValueError:
            continue
        # `since` is cut to the second: a healthy look within that second is passed over for
        # the one before it, never one taken after the stretch began.
        at = worlds.last_healthy_at(c, agent, str(name), since.timestamp())
        if at is not None:
            found[str(name)] = iso(datetime.fromtimestamp(at, UTC))
    return found


def for_item(c: Conn, item: InboxItem) -> JSON | None:
    """The item's evidence summary (`agentd.views.evidence.summary`), or None when it has no
    world and no run (a home-wide notice)."""
    steps: list[Step] = []
    agent = None
    if item.run_id is not None:
        try:
            agent = q.get_run(c, item.run_id).agent
            steps = q.list_steps(c, item.run_id)
        except NotFound:
            pass  # the run was pruned: the item's own world may remain
    world = world_of(c, item, steps)
    if not world and not steps:
        return None
    return ev.summary(world, steps, healthy_until(c, agent, world) if agent else None)


def of_item(store: SyncStore, item: InboxItem) -> JSON | None:
    """`for_item` in one read: what `inbox show`, the web item page and the demo print."""
    return store.read(lambda c: for_item(c, item))
