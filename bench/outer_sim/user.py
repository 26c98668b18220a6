"""The scripted user: asleep 22:00–07:00 local (in whatever time zone they are in that day), reads
what arrives 5–90 minutes later when awake, or soon after 07:00 when it arrived at night.

On reading: a clarifying question is answered from the scenario's hidden table; "achieved?" is
confirmed once the goal's deadline has passed; a nudge is accepted only if it is new (no nudge on the
same need was accepted before), relevant (a need the user has, its time come and not gone) and not one
they decline — else dismissed, with a reason. Declines belong to the need and the user, not to who
asked first: the job-seeker is not looking yet and turns down the first three postings that suit
them ("not now"), whichever policy nudges about them, whenever. The user acts through an `Inbox`:
agentd's real inbox functions, or a baseline's list.

Needs met (the same denominator for every policy, `Scenario.counted`): of the scenario's relevant
needs that the user does not decline and whose deadline falls inside the run, those the user
accepted a nudge about between the need's opening and its deadline.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from bench.outer_sim.scenarios import Need, Scenario, asleep, wake_after

MINUTE = 60.0


@dataclass(frozen=True)
class Item:
    item_id: int
    rule: str  # "nudge" | "clarify" | "achieved"
    text: str  # the nudge's topic, or the question
    posted_at: float


class Inbox(Protocol):
    def open_items(self) -> list[Item]: ...

    def answer(self, item: Item, text: str, now: float) -> None: ...

    def accept(self, item: Item, now: float) -> bool:
        """False when it cannot be accepted now (a run of the goal is still going)."""
        ...

    def dismiss(self, item: Item, reason: str, now: float) -> None: ...


@dataclass
class User:
    sc: Scenario
    rng: random.Random
    accepted: dict[str, float] = field(default_factory=dict)  # need key → when accepted
    declined: set[str] = field(default_factory=set)  # declined needs the user was nudged about
    n_accepted: int = 0
    n_dismissed: int = 0
    responses: list[float] = field(default_factory=list)  # when the user answered anything
    dismissals: list[float] = field(default_factory=list)
    first_accept: float | None = None

    @classmethod
    def of(cls, sc: Scenario, policy: str) -> User:
        return cls(sc, random.Random(f"user:{sc.name}:{sc.seed}:{policy}"))

    def read_at(self, posted: float) -> float:
        """When the user reads an item delivered at `posted`."""
        if asleep(posted, self.sc.tz_at(posted)):
            return wake_after(posted, self.sc.tz_at(posted)) + self.rng.uniform(1, 20) * MINUTE
        t = posted + self.rng.uniform(5, 90) * MINUTE
        if asleep(t, self.sc.tz_at(t)):
            return wake_after(t, self.sc.tz_at(t)) + self.rng.uniform(1, 20) * MINUTE
        return t

    def read(self, inbox: Inbox, now: float) -> tuple[list[tuple[Item, Need]], bool]:
        """Go through the open items. Returns the accepted nudges with their needs, and whether
        one could not be accepted now (read again later)."""
        done: list[tuple[Item, Need]] = []
        busy = False
        for item in sorted(inbox.open_items(), key=lambda i: i.item_id):
            if item.posted_at > now:
                continue
            if item.rule == "clarify":
                said = next(iter(self.sc.answers.values()), "No preference; you decide.")
                inbox.answer(item, said, now)
            elif item.rule == "achieved":
                over = self.sc.deadline is not None and now > self.sc.deadline
                inbox.answer(item, "yes" if over else "not yet", now)
            else:
                need, reason = self._judge(item, now)
                if reason is not None:
                    inbox.dismiss(item, reason, now)
                    self.n_dismissed += 1
                    self.dismissals.append(now)
                elif need is not None and inbox.accept(item, now):
                    self.accepted[need.key] = now
                    self.n_accepted += 1
                    self.first_accept = self.first_accept or now
                    done.append((item, need))
                else:
                    busy = True
                    continue
            self.responses.append(now)
        return done, busy

    def _judge(self, item: Item, now: float) -> tuple[Need | None, str | None]:
        """(the need, None) to accept; (…, a reason) to dismiss."""
        need = self.sc.need_of(item.text)
        if need is not None and need.declined:
            self.declined.add(need.key)
            return need, "not now"
        if need is None or not need.relevant:
            return need, "not relevant to me"
        if need.key in self.accepted:
            return need, "already done"
        if now < need.opens:
            return need, "too early for that"
        if now > need.deadline:
            return need, "too late now"
        return need, None

    def needs_met(self) -> tuple[int, int]:
        """(met, counted) over `Scenario.counted()`: met if accepted by the deadline."""
        counted = self.sc.counted()
        met = sum(1 for n in counted if self.accepted.get(n.key, n.deadline + 1) <= n.deadline)
        return met, len(counted)
