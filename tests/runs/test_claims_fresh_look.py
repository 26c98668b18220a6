"""An unconfirmed success is judged on a fresh look (issue 34, item 6): the run's last look may
be minutes old — a slow local model's decision, a model retry, a wait for the operator — and a
service that recovered meanwhile makes the claimed success real, not a failure to retry."""

from __future__ import annotations

from datetime import UTC, datetime

from agentd.models import JSON, Step, StepKind, StepStatus
from agentd.runs import claims

NOW = datetime(2026, 12, 7, tzinfo=UTC)
START = Step(run_id=1, seq=1, kind=StepKind.START, status=StepStatus.DONE, created_at=NOW,
             completed_at=NOW, data={"trigger": "state:health.unhealthy",
                                     "data": {"source": "health", "state": "unhealthy"}})  # fmt: skip
STALE: JSON = {"health": {"ok": False, "status": 500}}


class Health:
    name = "health"

    def __init__(self, ok: bool) -> None:
        self.ok, self.looks = ok, 0

    async def observe(self) -> JSON:
        self.looks += 1
        return {"ok": self.ok, "status": 200 if self.ok else 500}


async def test_a_world_that_recovered_since_the_last_look_confirms_the_success() -> None:
    health = Health(ok=True)
    assert claims.trigger_holds([START], STALE) is not None  # the stale look alone would refuse
    assert await claims.still_holds([START], STALE, {"health": health}) is None
    assert health.looks == 1


async def test_a_world_still_failing_on_the_fresh_look_leaves_the_success_unconfirmed() -> None:
    health = Health(ok=False)
    said = await claims.still_holds([START], STALE, {"health": health})
    assert said == "health is still unhealthy (the trigger health.unhealthy holds)"


async def test_no_fresh_look_when_the_last_one_already_shows_recovery() -> None:
    health = Health(ok=False)
    assert await claims.still_holds([START], {"health": {"ok": True}}, {"health": health}) is None
    assert health.looks == 0
