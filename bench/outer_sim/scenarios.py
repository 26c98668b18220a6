"""The six scenarios, each drawn from one seed and identical for every policy: the goal (or, in
`many`, 200 copies of one on one agent), the world's timeline (job postings, service health, failed
runs, a source the agent gains), the needs the user has and their deadlines, the faults (daemon
outages, one ending inside quiet hours; a time-zone move), and what the user knows but has not said
(answers to clarifying questions).

Dates cross both DST changes of Europe/Berlin (29 March and 25 October 2026): even seeds run in
spring, odd seeds in autumn.
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from agentd.models import JSON

HOUR, DAY = 3600.0, 86400.0
TZ0 = "Europe/Berlin"
SLEEP = (22 * 60, 7 * 60)  # the user's night, local minutes (start, end)
SCENARIOS = ("party", "job", "idle", "service", "many", "gains_source")
MANY_GOALS = 200


def at_local(d: date, hour: int, minute: int, tz: str) -> float:
    """The instant the wall clock in `tz` reads hour:minute on `d`: the first one if it reads
    it twice (DST ends), the moment the clock jumps past it if it never does (DST begins)."""
    t = datetime(d.year, d.month, d.day, hour, minute, tzinfo=ZoneInfo(tz)).timestamp()
    wall = local(t, tz)
    if (wall.hour, wall.minute) == (hour, minute):
        return t
    lo, hi = t - 3 * HOUR, t  # inside a spring-forward gap: find the jump
    while hi - lo > 1:
        mid = (lo + hi) / 2
        w = local(mid, tz)
        if w.date() == d and (w.hour, w.minute) >= (hour, minute):
            hi = mid
        else:
            lo = mid
    return float(int(hi) // 60 * 60)  # zones jump on whole minutes


def local(t: float, tz: str) -> datetime:
    return datetime.fromtimestamp(t, ZoneInfo(tz))


def asleep(t: float, tz: str) -> bool:
    """Inside the user's night (22:00–07:00 local)."""
    wall = local(t, tz)
    m = wall.hour * 60 + wall.minute
    return m >= SLEEP[0] or m < SLEEP[1]


def wake_after(t: float, tz: str) -> float:
    """The end of the night containing `t` (t itself when awake)."""
    if not asleep(t, tz):
        return t
    wall = local(t, tz)
    d = wall.date() + timedelta(days=1) if wall.hour * 60 + wall.minute >= SLEEP[0] else wall.date()
    return at_local(d, SLEEP[1] // 60, SLEEP[1] % 60, tz)


@dataclass(frozen=True)
class Need:
    """Something the user needs done by a deadline; met when the user accepts a nudge about it
    (opens ≤ accepted ≤ deadline). Irrelevant needs are things a model may nudge about that the
    user does not want (they dismiss them); they are not counted. A declined need is one this
    user turns down whenever asked ("not now": the job-seeker is not looking yet when the first
    postings that suit them appear) — drawn with the scenario from its seed, the same for every
    policy, and not counted either: no policy could meet it."""

    key: str  # "venue", "p3", "incident 4"
    label: str  # the canonical nudge topic
    task: str  # the suggested action's argument (lowercase, fits the `do` action's pattern)
    opens: float
    deadline: float
    relevant: bool = True
    message: str = ""
    declined: bool = False


@dataclass(frozen=True)
class WorldEvent:
    at: float
    # "set": a source's state; "fail": a failed run; "same": a look that sees no change; "add": the
    # agent gains the source (a config reload), whose first look sees `value`
    kind: str
    source: str
    value: JSON
    need: str | None = None  # the need it creates (an incident, a posting)


@dataclass(frozen=True)
class Outage:
    start: float
    end: float


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    start: float
    end: float
    title: str
    why: str
    criteria: list[str]
    deadline: float | None
    needs: list[Need]
    world: list[WorldEvent]
    initial_world: JSON
    outages: list[Outage]
    tz_change: tuple[float, str] | None = None
    cadence: JSON = field(default_factory=dict)  # the operator's `goal cadence` overrides
    schedules: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, spec, tz)
    question: str | None = None  # what a sensible model asks first, if the goal is vague
    answers: dict[str, str] = field(default_factory=dict)  # hidden: keyword → the user's answer
    # The user turns down the first this-many relevant needs to open (`Need.declined`).
    dismiss_first: int = 0
    goals: int = 1  # copies of the goal on the one agent (each checked in on its own)
    # The agent's sources are seen for the first time after the goals exist (a first boot): the
    # initial world is the poller's first look at start, not a look from before the goals.
    first_boot: bool = False
    sources: tuple[str, ...] = ()  # the agent's configured sources at start (`[sources.NAME]`)

    @property
    def days(self) -> float:
        return (self.end - self.start) / DAY

    def tz_at(self, t: float) -> str:
        if self.tz_change is not None and t >= self.tz_change[0]:
            return self.tz_change[1]
        return TZ0

    def counted(self) -> list[Need]:
        """The needs every policy is judged on, the same set for each: relevant, not declined,
        and due inside the run (a deadline after its end cannot be missed yet, nor shown met)."""
        return [n for n in self.needs if n.relevant and not n.declined and n.deadline <= self.end]

    def need_of(self, text: str) -> Need | None:
        """Which need a nudge is about, from its words (the user's reading, and the model's of
        its own notes)."""
        low = text.lower()
        for need in self.needs:
            if _mentions(need, low):
                return need
        return None


def _mentions(need: Need, low: str) -> bool:
    if need.key.startswith("incident"):
        return re.search(rf"\b{need.key}\b", low) is not None
    if need.key.startswith("p"):  # a posting: its company's name is unique
        return need.label.split(" at ")[-1].lower() in low
    return any(w in low for w in PARTY_WORDS[need.key])


# ── outages ──────────────────────────────────────────────────────────────────────────────────────


def outages(rng: random.Random, start: float, end: float) -> list[Outage]:
    """One outage of 1–24 h at a random time, and one whose restart falls inside the night."""
    a0 = rng.uniform(start + 6 * HOUR, end - 30 * HOUR)
    first = Outage(a0, a0 + rng.uniform(1, 24) * HOUR)
    for _ in range(100):
        night = rng.uniform(start + DAY, end - DAY)
        d = local(night, TZ0).date()
        restart = at_local(d, 23, 0, TZ0) + rng.uniform(0, 7 * HOUR)
        second = Outage(restart - rng.uniform(1, 10) * HOUR, restart)
        if second.start > first.end + HOUR or second.end < first.start - HOUR:
            return sorted([first, second], key=lambda o: o.start)
    return [first]


def _season_start(rng: random.Random, seed: int, spring: date, autumn: date, spread: int) -> date:
    base = spring if seed % 2 == 0 else autumn
    return base + timedelta(days=rng.randrange(spread))


# ── (a) plan a party for next Saturday ──────────────────────────────────────────────────────────

PARTY_WORDS = {
    "invitations": ("invit",),
    "venue": ("venue",),
    "food": ("food", "drinks"),
    "reminder": ("remind",),
}


def party(seed: int) -> Scenario:
    rng = random.Random(f"party:{seed}")
    saturday = date(2026, 3, 28) if seed % 2 == 0 else date(2026, 10, 24)
    start = at_local(saturday, 9, 0, TZ0) + rng.uniform(0, 11 * HOUR)
    party_at = at_local(saturday + timedelta(days=7), 19, 0, TZ0)
    needs = [
        Need("invitations", "send the invitations", "send the invitations", start,
             party_at - 5 * DAY, message="Send the invitations today so people keep Saturday free."),
        Need("venue", "book the venue", "book the venue", start, party_at - 2 * DAY,
             message="Book the bar in Kreuzberg for about 20 people."),
        Need("food", "order food and drinks", "order food and drinks", start, party_at - DAY,
             message="Order snacks and drinks for 20, to be delivered on Saturday."),
        Need("reminder", "remind the guests", "remind the guests", party_at - 2 * DAY,
             party_at - 3 * HOUR, message="Send the guests a reminder with the address."),
    ]  # fmt: skip
    end = party_at + 36 * HOUR
    return Scenario(
        name="party", seed=seed, start=start, end=end,
        title="plan a party for next Saturday",
        why="Sam turns 30; friends from work and the climbing club", criteria=[],
        deadline=party_at, needs=needs, world=[], initial_world={},
        outages=outages(rng, start, party_at),
        question="How many guests, what budget, and where would you like to hold it?",
        answers={"guests": "About 20 guests, 400 euros, a bar in Kreuzberg or our flat."},
    )  # fmt: skip


# ── (b) find a backend job, 60 days ─────────────────────────────────────────────────────────────

COMPANIES = (  # unique: a posting is told by its company's name
    "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Starkware", "Wayneco", "Wonka", "Cyberdyne",
    "Soylent", "Tyrell", "Aperture", "Vandelay", "Piedpiper", "Massive", "Oscorp", "Gringotts",
    "Monarch", "Nakatomi", "Prestige", "Dunder", "Sirius", "Virtucon", "Gekko", "Zorg", "Bluth",
    "Krusty", "Duff", "Oceanic", "Weyland", "Encom", "Lacuna", "Nostromo", "Rekall", "Spacely",
    "Cogswell",
)  # fmt: skip
LEVELS = ("Junior", "Mid-level", "Senior", "Senior", "Staff")
AREAS = ("Backend", "Backend", "Backend", "Frontend", "Data")
PLACES = ("remote", "Berlin", "Berlin", "Munich on-site")
NOT_LOOKING = 3  # the first postings that suit the job-seeker, declined: not looking yet


def job(seed: int) -> Scenario:
    rng = random.Random(f"job:{seed}")
    d0 = _season_start(rng, seed, date(2026, 3, 1), date(2026, 9, 15), 20)
    start = at_local(d0, 9, 0, TZ0) + rng.uniform(0, 9 * HOUR)
    end = start + 60 * DAY
    needs: list[Need] = []
    world: list[WorldEvent] = []
    openings: list[tuple[float, float, JSON]] = []
    t, companies = start, list(COMPANIES)
    rng.shuffle(companies)
    while (t := t + rng.expovariate(1 / (2.5 * DAY))) < end - DAY and companies:
        level, area, place = rng.choice(LEVELS), rng.choice(AREAS), rng.choice(PLACES)
        company, key = companies.pop(), f"p{len(needs) + 1}"
        title = f"{level} {area} Engineer ({place})"
        closes = t + rng.uniform(21, 35) * DAY
        relevant = area == "Backend" and level in ("Senior", "Staff") and place != "Munich on-site"
        label = f"apply: {title} at {company}"
        task = f"apply to {company} {level} {area} engineer".lower()
        needs.append(Need(key, label, task, t, closes, relevant,
                          f"{company} posted a {title} role; apply with the current CV."))  # fmt: skip
        openings.append((t, closes, {"id": key, "title": title, "company": company}))
    # Not looking yet: the first three postings that suit them they let go, whoever asks.
    first = sorted((n for n in needs if n.relevant), key=lambda n: n.opens)[:NOT_LOOKING]
    needs = [dataclasses.replace(n, declined=n in first) for n in needs]
    for moment in sorted({x for o in openings for x in o[:2] if x < end}):
        listed = [p for a, b, p in openings if a <= moment < b]
        world.append(WorldEvent(moment, "set", "jobs", {"ok": True, "open": listed}))
    return Scenario(
        name="job", seed=seed, start=start, end=end, title="find a backend job",
        why="my contract ends in the summer", criteria=[], deadline=None, needs=needs,
        world=world, initial_world={"jobs": {"ok": True, "open": []}},
        outages=outages(rng, start, end),
        tz_change=(start + rng.uniform(25, 35) * DAY, "America/New_York"),
        schedules=[("cron", "0 9 * * mon", TZ0)],
        question="What kind of backend role: seniority, location or remote, and stack?",
        answers={"role": "Senior or staff backend roles, remote or in Berlin; Python or Go."},
        dismiss_first=NOT_LOOKING,
    )  # fmt: skip


# ── (c) nothing changes for 30 days ─────────────────────────────────────────────────────────────


def idle(seed: int) -> Scenario:
    rng = random.Random(f"idle:{seed}")
    d0 = _season_start(rng, seed, date(2026, 3, 15), date(2026, 10, 10), 10)
    start = at_local(d0, 9, 0, TZ0) + rng.uniform(0, 9 * HOUR)
    end = start + 30 * DAY
    same = {"garden": {"ok": True, "position": 37}}
    daily = [WorldEvent(start + k * DAY + 1800, "same", "", {}) for k in range(30)]
    return Scenario(
        name="idle", seed=seed, start=start, end=end,
        title="watch the allotment garden waiting list", why="we want a garden plot",
        criteria=["a plot is offered to us"], deadline=None, needs=[], world=daily,
        initial_world=same, outages=outages(rng, start, end),
        tz_change=(start + rng.uniform(10, 20) * DAY, "Asia/Tokyo"),
        # A nightly digest at 02:30 Berlin time: on the spring DST night that wall time does not
        # exist, on the autumn night it happens twice — one fire each night all the same.
        schedules=[("cron", "30 2 * * *", TZ0)],
    )  # fmt: skip


# ── (d) a service watch: degradations now and then ──────────────────────────────────────────────

INCIDENTS = {  # kind → (source, what the watch sees, the fix, hours to act)
    "disk": ("disk", "db1 disk 91% full", "free disk space on db1", 48),
    "cert": ("cert", "TLS certificate expires in 9 days", "renew the tls certificate", 120),
    "errors": ("errors", "error rate 4% since deploy 1.4.2", "roll back deploy 1.4.2", 24),
    "backup": ("backup", "nightly backup failed: quota exceeded", "rerun the nightly backup", 36),
}
HEALTHY: JSON = {s: {"ok": True, "status": "ok"} for s in ("disk", "cert", "errors")}


def service(seed: int) -> Scenario:
    rng = random.Random(f"service:{seed}")
    d0 = _season_start(rng, seed, date(2026, 3, 15), date(2026, 10, 10), 10)
    start = at_local(d0, 9, 0, TZ0) + rng.uniform(0, 9 * HOUR)
    end = start + 30 * DAY
    needs: list[Need] = []
    world: list[WorldEvent] = []
    t = start
    busy: dict[str, float] = {}  # source → until when its incident may last (one at a time)
    while (t := t + rng.expovariate(1 / (4 * DAY))) < end - DAY:
        free = [k for k, v in INCIDENTS.items() if k == "backup" or busy.get(v[0], 0) < t]
        kind = rng.choice(free)
        source, seen, fix, hours = INCIDENTS[kind]
        busy[source] = t + (hours + 24) * HOUR
        key = f"incident {len(needs) + 1}"
        needs.append(Need(key, f"{fix} ({key})", fix, t, t + hours * HOUR,
                          message=f"{seen}: {fix}."))  # fmt: skip
        value = {"ok": False, "status": seen, "incident": key}
        world.append(WorldEvent(t, "fail" if kind == "backup" else "set", source, value, key))
        # Unhandled, someone else fixes it a day after its deadline.
        if kind != "backup":
            world.append(WorldEvent(t + (hours + 24) * HOUR, "set", source, HEALTHY[source], key))
    daily = [WorldEvent(start + k * DAY + 1800, "same", "", {}) for k in range(30)]
    return Scenario(
        name="service", seed=seed, start=start, end=end,
        title="keep the shop's web service healthy", why="customers order at night too",
        criteria=["no degradation left unhandled"], deadline=None, needs=needs,
        world=sorted(world + daily, key=lambda w: w.at), initial_world=dict(HEALTHY),
        outages=outages(rng, start, end),
        tz_change=(start + rng.uniform(10, 20) * DAY, "America/New_York"),
        cadence={"every_s": 6 * HOUR, "min_s": HOUR, "max_s": 12 * HOUR},
        schedules=[("cron", "30 8 * * *", TZ0)],
    )  # fmt: skip


# ── (e) many goals on one agent, first boot, nothing changes for 30 days ───────────────────────


def many(seed: int) -> Scenario:
    """200 watch goals on one agent, added before the daemon's first boot: the agent's source is
    seen for the first time after they exist (a baseline, not a change), then never changes."""
    rng = random.Random(f"many:{seed}")
    d0 = _season_start(rng, seed, date(2026, 3, 15), date(2026, 10, 10), 10)
    start = at_local(d0, 9, 0, TZ0) + rng.uniform(0, 9 * HOUR)
    end = start + 30 * DAY
    daily = [WorldEvent(start + k * DAY + 1800, "same", "", {}) for k in range(30)]
    return Scenario(
        name="many", seed=seed, start=start, end=end,
        title="watch the allotment garden waiting list", why="we want a garden plot",
        criteria=["a plot is offered to us"], deadline=None, needs=[], world=daily,
        initial_world={"garden": {"ok": True, "position": 37}}, outages=outages(rng, start, end),
        goals=MANY_GOALS, first_boot=True, sources=("garden",),
    )  # fmt: skip


# ── (f) a service watch whose agent gains a source mid-run ──────────────────────────────────────


def gains_source(seed: int) -> Scenario:
    """A service watch on disk and cert; a config reload on day 9–13 adds the error-rate source
    (its first look is a baseline: healthy), which degrades 1.5–5 days later and once more a week
    after. One disk incident comes before the reload."""
    rng = random.Random(f"gains_source:{seed}")
    d0 = _season_start(rng, seed, date(2026, 3, 15), date(2026, 10, 10), 10)
    start = at_local(d0, 9, 0, TZ0) + rng.uniform(0, 9 * HOUR)
    end = start + 30 * DAY
    added = start + rng.uniform(9, 13) * DAY
    plan = [("disk", start + rng.uniform(1, 4) * DAY),
            ("errors", added + rng.uniform(1.5, 5) * DAY)]  # fmt: skip
    plan.append(("errors", plan[-1][1] + rng.uniform(6, 9) * DAY))
    needs: list[Need] = []
    world = [WorldEvent(added, "add", "errors", HEALTHY["errors"])]
    for kind, t in plan:
        source, seen, fix, hours = INCIDENTS[kind]
        key = f"incident {len(needs) + 1}"
        needs.append(Need(key, f"{fix} ({key})", fix, t, t + hours * HOUR,
                          message=f"{seen}: {fix}."))  # fmt: skip
        world.append(WorldEvent(t, "set", source, {"ok": False, "status": seen, "incident": key},
                                key))  # fmt: skip
        world.append(WorldEvent(t + (hours + 24) * HOUR, "set", source, HEALTHY[source], key))
    daily = [WorldEvent(start + k * DAY + 1800, "same", "", {}) for k in range(30)]
    initial = {s: HEALTHY[s] for s in ("disk", "cert")}
    return Scenario(
        name="gains_source", seed=seed, start=start, end=end,
        title="keep the shop's web service healthy", why="customers order at night too",
        criteria=["no degradation left unhandled"], deadline=None, needs=needs,
        world=sorted(world + daily, key=lambda w: w.at), initial_world=initial,
        outages=outages(rng, start, end), sources=("disk", "cert"),
        cadence={"every_s": 6 * HOUR, "min_s": HOUR, "max_s": 12 * HOUR},
        schedules=[("cron", "30 8 * * *", TZ0)],
    )  # fmt: skip


def added_source(sc: Scenario) -> WorldEvent | None:
    """The source the agent gains mid-run (its "add" event), if any."""
    return next((w for w in sc.world if w.kind == "add"), None)


BUILD = {"party": party, "job": job, "idle": idle, "service": service, "many": many,
         "gains_source": gains_source}  # fmt: skip
