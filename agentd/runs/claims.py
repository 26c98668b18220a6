"""What the harness checks of a model's claims instead of trusting them (a dumb model finishes
"succeeded" mid-outage and says the same thing ten ways): a success while the state that started
the run still holds is recorded as unconfirmed, and the watch starts a new run after a cool-down;
notices and questions one run posts are limited by rate and by near-duplicate text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentd.db import meta, notices, stamp
from agentd.models import JSON, Step, StepKind
from agentd.sources import Source, observe_all, state_of

# Two texts whose word sets overlap this much say the same thing (Jaccard similarity).
NEAR_DUPLICATE = 0.6
_WORD = re.compile(r"[a-z0-9]+")


def trigger_holds(steps: list[Step], world: JSON) -> str | None:
    """Why a claimed success is unconfirmed: the run was started by a source's state
    (`state:health.unhealthy`) and its latest look still shows that state; else None."""
    start = next((s.data for s in steps if s.kind == StepKind.START), {})
    trigger = str(start.get("trigger") or "")
    if not trigger.startswith("state:"):
        return None
    source = (start.get("data") or {}).get("source")
    state = (start.get("data") or {}).get("state")
    obs = world.get(source) if isinstance(source, str) else None
    if not isinstance(obs, dict) or state is None or state_of(obs) != state:
        return None
    return f"{source} is still {state} (the trigger {trigger[6:]} holds)"


async def still_holds(steps: list[Step], world: JSON, sources: Mapping[str, Source]) -> str | None:
    """`trigger_holds`, confirmed by a fresh look at the trigger's source: the run's last look
    may be minutes old (a slow model's decision, a retry, a wait for the operator), and a world
    that recovered since makes the claimed success a real one."""
    if trigger_holds(steps, world) is None:
        return None
    start = next((s.data for s in steps if s.kind == StepKind.START), {})
    source = sources.get(str((start.get("data") or {}).get("source")))
    if source is None:  # no longer configured: the last look is all there is
        return trigger_holds(steps, world)
    return trigger_holds(steps, {**world, **await observe_all([source])})


def cool_down(c: Any, goal_id: int, steps: list[Step], until: float) -> None:
    """Let the watch start a new run for this episode once `until` has passed (the episode's
    mark, which otherwise says "this episode had its run", becomes a cool-down)."""
    start = next((s.data for s in steps if s.kind == StepKind.START), {})
    trigger = str(start.get("trigger") or "")[6:]
    meta.set_meta(c, f"episode:{goal_id}:{trigger}", f"cooldown:{until}")


def cooling(mark: str | None, now: float) -> bool:
    """Whether an episode mark is a cool-down not yet over (see `cool_down`)."""
    if not mark or not mark.startswith("cooldown:"):
        return False
    try:
        return now < float(mark.removeprefix("cooldown:"))
    except ValueError:
        return False


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def notice_refusal(c: Any, run_id: int, kind: str, text: str, per_hour: int) -> str | None:
    """Why a run may not post this notice or question (`kind`) now; None when it may. A question
    is a near duplicate only of an earlier question: one that repeats a notice asks for the
    answer the notice could not get."""
    earlier = notices.posted_by_run(c, run_id)
    hour = [at for at, _, _ in earlier if at >= stamp.now(c) - 3600]
    if len(hour) >= per_hour:
        return (
            f"notice limit: this run posted {len(hour)} notices or questions in the last "
            f"hour (limits.max_notices_per_hour = {per_hour})"
        )
    new = _words(text)
    for _, was, said in earlier:
        old = _words(said) if was == kind else set()
        if new and old and len(new & old) / len(new | old) >= NEAR_DUPLICATE:
            return "notice limit: this run already posted nearly the same notice"
    return None
