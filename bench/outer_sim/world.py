"""The simulated world one scenario run sees: sources' current states, changed by the scenario's
timeline and by the user's accepted nudges (a fixed incident turns healthy again)."""

from __future__ import annotations

import copy

from agentd.models import JSON
from bench.outer_sim.scenarios import HEALTHY, Scenario, WorldEvent


class World:
    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.state: JSON = copy.deepcopy(sc.initial_world)

    def apply(self, ev: WorldEvent) -> bool:
        """Apply a timeline event; True when a source's state changed. A "heal" (a set with the
        need of the incident it ends) applies only while that incident is still open. An "add" (the
        agent gains a source) is no change: the source's first look is a baseline."""
        if ev.kind == "add":
            self.state[ev.source] = copy.deepcopy(ev.value)
            return False
        if ev.kind != "set":
            return False
        current = self.state.get(ev.source)
        if (
            ev.need is not None
            and ev.value.get("ok")
            and (current or {}).get("incident") != ev.need
        ):
            return False
        if current == ev.value:
            return False
        self.state[ev.source] = copy.deepcopy(ev.value)
        return True

    def fix(self, need_key: str) -> bool:
        """The user's accepted run fixed an incident: its source is healthy again."""
        for source, obs in self.state.items():
            if isinstance(obs, dict) and obs.get("incident") == need_key:
                self.state[source] = copy.deepcopy(HEALTHY[source])
                return True
        return False

    def snapshot(self) -> JSON:
        return copy.deepcopy(self.state)
