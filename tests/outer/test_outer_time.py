"""The outer loop's time math: schedules (cron / interval, time zones, DST, jitter, misfire
catch-up) and cadence (clamps, backoff, deadlines, snoozes, quiet hours). Every timestamp is
explicit; nothing reads the wall clock."""

from __future__ import annotations

import itertools
import sqlite3
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.config import Checkin
from agentd.outer.cadence import (
    DAY,
    Cadence,
    cadence_from,
    format_duration,
    in_quiet,
    leave_quiet,
    next_look,
    parse_duration,
    parse_quiet,
)
from agentd.outer.schedule import (
    SKIPPED_LIMIT,
    ScheduleSpec,
    catch_up,
    fires_between,
    jitter,
    next_fire,
    parse_spec,
)

HOUR = 3600.0
BERLIN, NEW_YORK = "Europe/Berlin", "America/New_York"
# 2026 transitions: Berlin springs forward 29 Mar 02:00→03:00 and falls back 25 Oct 03:00→02:00;
# New York springs forward 8 Mar 02:00→03:00 and falls back 1 Nov 02:00→01:00.
SPRING = {BERLIN: date(2026, 3, 29), NEW_YORK: date(2026, 3, 8)}
FALL = {BERLIN: date(2026, 10, 25), NEW_YORK: date(2026, 11, 1)}


def at(tz: str, y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> float:
    """Unix seconds of a local wall time (first occurrence if ambiguous)."""
    return datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz)).timestamp()


def wall(tz: str, t: float) -> datetime:
    return datetime.fromtimestamp(t, ZoneInfo(tz))


def fires(s: ScheduleSpec, start: float, n: int, goal_id: int = 1) -> list[float]:
    out, t = [], start
    for _ in range(n):
        t = next_fire(s, t, goal_id)
        out.append(t)
    return out


def cadence(tz: str = BERLIN, every_s: float = DAY, quiet: str | None = "22:00-08:00") -> Cadence:
    return Cadence(every_s=every_s, min_s=4 * HOUR, max_s=14 * DAY, quiet=parse_quiet(quiet), tz=tz)


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "spec", "tz", "hint"),
    [
        ("cron", "0 9 * *", "UTC", "5 fields"),
        ("cron", "61 9 * * *", "UTC", "out of range 0-59"),
        ("cron", "0 9 * * mn", "UTC", "sun mon tue"),
        ("cron", "0 9 * * fri-mon", "UTC", "runs backwards"),
        ("cron", "0 0 30 feb *", "UTC", "never fires"),
        ("cron", "*/0 * * * *", "UTC", "positive number"),
        ("cron", "@reboot", "UTC", "not supported"),
        ("cron", "0 9 * * *", "Berlin", "IANA"),
        ("interval", "3d", "UTC", "must be seconds"),
        ("interval", "0", "UTC", "at least 1 second"),
        ("weekly", "1", "UTC", '"cron" or "interval"'),
    ],
)
def test_parse_spec_rejects_with_a_teaching_message(
    kind: str, spec: str, tz: str, hint: str
) -> None:
    with pytest.raises(ValueError, match=hint):
        parse_spec(kind, spec, tz)


def test_parse_spec_rejects_an_unknown_misfire_policy() -> None:
    with pytest.raises(ValueError, match="skip, once, all"):
        parse_spec("interval", "60", "UTC", misfire="twice")


@pytest.mark.parametrize(
    ("spec", "normal"),
    [
        ("0 9 * * 1-5", "0 9 * * mon-fri"),
        ("0 9 * * 0,6", "0 9 * * sun,sat"),
        ("0 9 * * 7", "0 9 * * sun"),
        ("0 9 * * MON-FRI", "0 9 * * mon-fri"),
        ("@daily", "0 0 * * *"),
        ("*/15 * * * *", "*/15 * * * *"),
    ],
)
def test_parse_spec_writes_weekday_numbers_as_names(spec: str, normal: str) -> None:
    # APScheduler reads "1" as Tuesday; names mean the same day to every reader
    assert parse_spec("cron", spec, "UTC").spec == normal


# --- next_fire ------------------------------------------------------------------------------------


def test_interval_next_fire_counts_whole_intervals_from_the_anchor() -> None:
    s = parse_spec("interval", "3600", "UTC")
    anchor = 1_000_000.0
    assert next_fire(s, anchor - 50_000, 1, anchor) == anchor + 3600  # never before the anchor
    assert next_fire(s, anchor, 1, anchor) == anchor + 3600
    assert next_fire(s, anchor + 3600, 1, anchor) == anchor + 7200  # strictly after
    assert next_fire(s, anchor + 3601, 1, anchor) == anchor + 7200


def test_cron_next_fire_is_a_local_wall_time() -> None:
    s = parse_spec("cron", "0 9 * * mon-fri", BERLIN)
    friday_10 = at(BERLIN, 2026, 6, 5, 10)
    t = next_fire(s, friday_10, 1)
    assert wall(BERLIN, t).strftime("%a %H:%M") == "Mon 09:00"
    assert t == at(BERLIN, 2026, 6, 8, 9)


def test_cron_weekday_zero_is_sunday_as_in_crontab() -> None:
    s = parse_spec("cron", "0 9 * * 0", "UTC")
    t = next_fire(s, at("UTC", 2026, 6, 1), 1)  # a Monday
    assert wall("UTC", t).strftime("%a") == "Sun"


def test_cron_day_of_month_or_day_of_week_when_both_are_given() -> None:
    s = parse_spec("cron", "0 9 13 * fri", "UTC")  # the 13th, and every Friday (Vixie cron)
    days = [wall("UTC", t).date() for t in fires(s, at("UTC", 2026, 2, 1), 6)]
    assert days == [date(2026, 2, d) for d in (6, 13, 20, 27)] + [
        date(2026, 3, 6),
        date(2026, 3, 13),
    ]


def test_fires_between_lists_every_fire_in_the_window_oldest_first() -> None:
    s = parse_spec("cron", "0 */6 * * *", "UTC")
    got = list(fires_between(s, at("UTC", 2026, 1, 1), at("UTC", 2026, 1, 2), 1))
    assert got == [at("UTC", 2026, 1, 1, h) for h in (6, 12, 18)] + [at("UTC", 2026, 1, 2)]


# --- jitter ----------------------------------------------------------------------------------------


def test_jitter_is_stable_per_goal_and_within_bounds() -> None:
    values = [jitter(goal_id, 600.0) for goal_id in range(1, 200)]
    assert values == [jitter(goal_id, 600.0) for goal_id in range(1, 200)]
    assert all(0 <= v < 600 for v in values)
    assert jitter(5, 0.0) == 0.0


def test_jitter_spreads_ten_goals_that_all_say_nine_oclock() -> None:
    s = parse_spec("cron", "0 9 * * *", BERLIN, jitter_s=600)
    nine = at(BERLIN, 2026, 6, 2, 9)
    times = sorted(next_fire(s, nine - HOUR, goal_id) for goal_id in range(1, 11))
    assert len(set(times)) == 10
    assert all(nine <= t < nine + 600 for t in times)
    assert times[-1] - times[0] > 300  # spread over the window, not bunched
    assert next_fire(s, nine + DAY - HOUR, 3) - next_fire(s, nine - HOUR, 3) == DAY  # same each day


# --- DST -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
@pytest.mark.parametrize("transition", ["spring", "fall"])
@pytest.mark.parametrize("clock", ["02:30", "01:30", "09:00", "00:00"])
def test_daily_cron_fires_exactly_once_each_local_day_across_dst(
    tz: str, transition: str, clock: str
) -> None:
    hh, mm = clock.split(":")
    s = parse_spec("cron", f"{int(mm)} {int(hh)} * * *", tz)
    day = (SPRING if transition == "spring" else FALL)[tz]
    start = at(tz, day.year, day.month, day.day) - 3 * DAY - 1
    got = fires(s, start, 7)
    assert [wall(tz, t).date() for t in got] == [day - timedelta(days=3 - i) for i in range(7)]
    for t in got:
        shown = wall(tz, t).strftime("%H:%M")
        if shown != clock:  # only a wall time the spring-forward jump skipped moves: to the jump
            assert (transition, tz, wall(tz, t).date(), shown) == ("spring", tz, day, "03:00")
            assert clock == "02:30"


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
def test_nine_oclock_stays_nine_oclock_local_across_both_transitions(tz: str) -> None:
    s = parse_spec("cron", "0 9 * * *", tz)
    got = fires(s, at(tz, 2026, 3, 1), 300)
    assert {wall(tz, t).strftime("%H:%M") for t in got} == {"09:00"}
    assert sorted({round(b - a) for a, b in itertools.pairwise(got)}) == [
        82800,
        86400,
        90000,
    ]


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
@pytest.mark.parametrize("transition", ["spring", "fall"])
def test_hourly_cron_fires_every_real_hour_across_dst(tz: str, transition: str) -> None:
    s = parse_spec("cron", "30 * * * *", tz)
    day = (SPRING if transition == "spring" else FALL)[tz]
    got = fires(s, at(tz, day.year, day.month, day.day) - 6 * HOUR, 48)
    assert all(b - a == HOUR for a, b in itertools.pairwise(got))


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
def test_a_year_of_daily_fires_never_doubles_nor_drops(tz: str) -> None:
    s = parse_spec("cron", "30 2 * * *", tz)
    got = list(fires_between(s, at(tz, 2026, 1, 1), at(tz, 2027, 1, 1), 1))
    assert len(got) == 365
    assert len({wall(tz, t).date() for t in got}) == 365


# --- catch-up ----------------------------------------------------------------------------------------

HOURLY_FROM_0 = 0.0  # anchor: an hourly interval fires on the hour (UTC)
T0 = 1_780_000_000 - 1_780_000_000 % 3600  # a fire


def hourly(misfire: str, **kw: float) -> ScheduleSpec:
    return parse_spec("interval", "3600", "UTC", misfire=misfire, **kw)  # type: ignore[arg-type]


def accounted(cu_run: list[float], cu_skipped: list[float], due: list[float]) -> bool:
    return sorted(cu_run + cu_skipped) == due and not set(cu_run) & set(cu_skipped)


@pytest.mark.parametrize("missed", [1, 30])
@pytest.mark.parametrize(
    ("misfire", "runs"),
    [("skip", lambda n: 0), ("once", lambda n: 1), ("all", lambda n: min(n, 3))],
)
def test_catch_up_after_downtime_follows_the_policy(
    misfire: str, runs: object, missed: int
) -> None:
    s = hourly(misfire, misfire_cap=3, max_lateness_s=100 * HOUR)
    now = T0 + missed * HOUR + 1800  # down across `missed` fires, back mid-hour
    due = [T0 + i * HOUR for i in range(1, missed + 1)]
    cu = catch_up(s, T0, now, goal_id=1, anchor=HOURLY_FROM_0)
    assert len(cu.run) == runs(missed)  # type: ignore[operator]
    assert cu.run == due[len(due) - len(cu.run) :]  # the newest ones, oldest first
    assert accounted(cu.run, cu.skipped, due)
    assert cu.skipped_count == len(cu.skipped) == missed - len(cu.run)


@pytest.mark.parametrize("misfire", ["skip", "once", "all"])
def test_catch_up_skips_whatever_is_older_than_the_max_lateness(misfire: str) -> None:
    s = hourly(misfire, misfire_cap=50, max_lateness_s=DAY)
    now = T0 + 30 * HOUR + 1800
    due = [T0 + i * HOUR for i in range(1, 31)]
    cu = catch_up(s, T0, now, goal_id=1, anchor=HOURLY_FROM_0)
    stale = [t for t in due if now - t > DAY]
    assert len(stale) == 6
    assert set(stale) <= set(cu.skipped)
    assert all(t >= cu.stale_before for t in cu.run)
    assert accounted(cu.run, cu.skipped, due)
    if misfire == "all":  # the cap is large: every fresh fire runs
        assert cu.run == [t for t in due if t not in stale]


def test_catch_up_when_everything_is_too_late_runs_nothing_but_records_it() -> None:
    s = parse_spec("cron", "0 9 * * mon", "UTC", misfire="once", max_lateness_s=DAY)
    last = at("UTC", 2026, 6, 1, 9)  # a Monday
    now = at("UTC", 2026, 6, 10, 12)  # Wednesday of the next week
    cu = catch_up(s, last, now, goal_id=1, anchor=0.0)
    assert cu.run == []
    assert cu.skipped == [at("UTC", 2026, 6, 8, 9)]


@pytest.mark.parametrize("back_at", [10, 12])
def test_a_daily_checkin_after_a_one_day_outage_runs_once(back_at: int) -> None:
    s = parse_spec("cron", "0 9 * * *", BERLIN, misfire="once", jitter_s=600)
    j = jitter(7, 600)
    last = at(BERLIN, 2026, 6, 1, 9) + j  # fired Monday; the daemon died right after
    now = at(BERLIN, 2026, 6, 2, back_at)  # back Tuesday late morning
    cu = catch_up(s, last, now, goal_id=7, anchor=0.0)
    assert cu.run == [at(BERLIN, 2026, 6, 2, 9) + j]
    assert cu.skipped == []


def test_catch_up_from_creation_when_never_fired() -> None:
    s = hourly("all", misfire_cap=10)
    created = T0 + 600
    cu = catch_up(s, None, created + 3 * HOUR, goal_id=1, anchor=created)
    assert cu.run == [created + i * HOUR for i in (1, 2, 3)]


def test_catch_up_runs_an_on_time_fire_under_every_policy() -> None:
    due = [T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]  # the last one is 20 s old: on time
    got = {}
    for misfire in ("skip", "once", "all"):
        cu = catch_up(hourly(misfire), T0, T0 + 3 * HOUR + 20, 1, HOURLY_FROM_0, grace_s=60)
        got[misfire] = (cu.run, cu.skipped)
    assert got["skip"] == ([due[2]], due[:2])
    assert got["once"] == ([due[2]], due[:2])  # the missed ones coalesce into the on-time fire
    assert got["all"] == (due, [])  # cap 3: the two missed ones run too


def test_catch_up_with_nothing_due_is_empty() -> None:
    cu = catch_up(hourly("all"), T0, T0 + 1800, goal_id=1, anchor=HOURLY_FROM_0)
    assert (cu.run, cu.skipped, cu.skipped_count) == ([], [], 0)


@pytest.mark.parametrize(("kind", "spec"), [("interval", "60"), ("cron", "* * * * *")])
def test_catch_up_of_a_year_of_minutes_counts_what_it_does_not_list(kind: str, spec: str) -> None:
    s = parse_spec(kind, spec, BERLIN, misfire="once", jitter_s=30)
    last = next_fire(s, at(BERLIN, 2025, 6, 1), 3, anchor=0.0)
    now = last + 365 * DAY
    cu = catch_up(s, last, now, goal_id=3, anchor=0.0)
    assert cu.truncated
    assert len(cu.run) == 1
    assert cu.skipped_count + len(cu.run) == 365 * 1440
    assert len(cu.skipped) == SKIPPED_LIMIT
    assert cu.skipped[-1] < cu.run[0] <= now < cu.run[0] + 60  # the newest, listed exactly
    assert all(b - a == 60 for a, b in itertools.pairwise(cu.skipped))


@settings(max_examples=150, deadline=None)
@given(
    kind_spec=st.sampled_from(
        [
            ("interval", "900"),
            ("interval", "86400"),
            ("cron", "*/20 * * * *"),
            ("cron", "30 2 * * *"),
        ]
    ),
    tz=st.sampled_from(["UTC", BERLIN, NEW_YORK, "Australia/Lord_Howe"]),
    misfire=st.sampled_from(["skip", "once", "all"]),
    cap=st.integers(1, 5),
    lateness_h=st.integers(1, 72),
    last=st.floats(1.70e9, 1.80e9),
    down_h=st.floats(0, 24 * 20),
    goal_id=st.integers(1, 10_000),
)
def test_catch_up_accounts_for_every_due_time(
    kind_spec: tuple[str, str],
    tz: str,
    misfire: str,
    cap: int,
    lateness_h: int,
    last: float,
    down_h: float,
    goal_id: int,
) -> None:
    s = parse_spec(
        *kind_spec, tz, misfire=misfire, misfire_cap=cap, max_lateness_s=lateness_h * HOUR
    )
    s = parse_spec(
        s.kind,
        s.spec,
        tz,
        misfire=misfire,
        misfire_cap=cap,
        max_lateness_s=lateness_h * HOUR,
        jitter_s=300,
    )
    now = last + down_h * HOUR
    due = list(fires_between(s, last, now, goal_id, anchor=1.6e9))
    cu = catch_up(s, last, now, goal_id, anchor=1.6e9)
    if cu.truncated:  # a long outage: the newest SKIPPED_LIMIT skipped are listed, all counted
        assert cu.skipped_count + len(cu.run) == len(due)
        assert cu.skipped == [t for t in due if t not in cu.run][-SKIPPED_LIMIT:]
    else:
        assert accounted(cu.run, cu.skipped, due)
    assert len(cu.run) <= {"skip": 0, "once": 1, "all": cap}[misfire]
    assert all(now - t <= s.max_lateness_s for t in cu.run)
    if misfire != "skip" and any(now - t <= s.max_lateness_s for t in due):
        assert cu.run and cu.run[-1] == due[-1]  # the newest fresh fire always runs


# --- cadence: parsing ---------------------------------------------------------------------------------


def test_parse_quiet_reads_hours_that_wrap_midnight() -> None:
    assert parse_quiet("22:00-08:00") == (1320, 480)
    assert parse_quiet("12:30-13:15") == (750, 795)
    assert parse_quiet(None) is None
    assert parse_quiet("none") is None
    with pytest.raises(ValueError, match="22:00-08:00"):
        parse_quiet("10pm-8am")
    with pytest.raises(ValueError, match="same time"):
        parse_quiet("08:00-08:00")


def test_durations_read_and_print_in_the_units_people_use() -> None:
    assert [parse_duration(x) for x in ("90s", "4h", "3d", "2w", "1d12h", "86400")] == [
        90,
        4 * HOUR,
        3 * DAY,
        14 * DAY,
        1.5 * DAY,
        DAY,
    ]
    assert [format_duration(x) for x in (30, 60, 4 * HOUR, 1.5 * DAY, 14 * DAY, 90061)] == [
        "30s",
        "1m",
        "4h",
        "1d12h",
        "14d",
        "1d1h",
    ]
    with pytest.raises(ValueError, match="4h, 3d"):
        parse_duration("three days")


def test_cadence_from_lays_the_goal_row_over_the_agent_defaults() -> None:
    agent = Checkin(every_s=DAY, min_s=4 * HOUR, max_s=14 * DAY, quiet="22:00-08:00", tz="UTC")
    assert cadence_from(agent, None) == Cadence(DAY, 4 * HOUR, 14 * DAY, (1320, 480), "UTC", 3)
    row = {"every_s": 3 * DAY, "min_s": None, "max_s": None, "quiet": "none", "tz": BERLIN}
    assert cadence_from(agent, row) == Cadence(3 * DAY, 4 * HOUR, 14 * DAY, None, BERLIN, 3)


def test_cadence_from_mends_incoherent_bounds() -> None:
    agent = Checkin(every_s=DAY, min_s=4 * HOUR, max_s=14 * DAY)
    c = cadence_from(agent, {"min_s": 2 * DAY, "max_s": DAY})
    assert (c.min_s, c.every_s, c.max_s) == (2 * DAY, 2 * DAY, 2 * DAY)


def test_cadence_from_reads_a_sqlite_row() -> None:
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    row = db.execute("SELECT 7200.0 AS min_s, NULL AS quiet").fetchone()
    c = cadence_from(Checkin(every_s=DAY, tz=NEW_YORK), row)
    assert (c.min_s, c.quiet, c.tz) == (7200.0, (1320, 480), NEW_YORK)
    db.close()


# --- quiet hours -----------------------------------------------------------------------------------------


def test_quiet_hours_wrap_midnight_in_the_goal_time_zone() -> None:
    c = cadence(NEW_YORK)
    assert in_quiet(c, at(NEW_YORK, 2026, 6, 2, 23))
    assert in_quiet(c, at(NEW_YORK, 2026, 6, 3, 7, 59))
    assert not in_quiet(c, at(NEW_YORK, 2026, 6, 3, 8))
    assert not in_quiet(c, at(NEW_YORK, 2026, 6, 2, 21, 59))
    assert not in_quiet(cadence(NEW_YORK, quiet=None), at(NEW_YORK, 2026, 6, 2, 23))


def test_quiet_hours_follow_the_local_clock_across_dst() -> None:
    c = cadence(BERLIN)
    utc_0730 = [at("UTC", 2026, 1, 15, 7, 30), at("UTC", 2026, 7, 15, 7, 30)]
    assert [in_quiet(c, t) for t in utc_0730] == [False, False]  # 08:30 CET / 09:30 CEST
    utc_0630 = [at("UTC", 2026, 1, 15, 6, 30), at("UTC", 2026, 7, 15, 6, 30)]
    assert [in_quiet(c, t) for t in utc_0630] == [True, False]  # 07:30 CET / 08:30 CEST


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
@pytest.mark.parametrize("table", [SPRING, FALL])
def test_leave_quiet_ends_at_eight_local_on_a_dst_night(tz: str, table: dict[str, date]) -> None:
    c = cadence(tz)
    day = table[tz]
    night = at(tz, day.year, day.month, day.day) - HOUR  # 23:00 the evening before
    assert leave_quiet(c, night) == at(tz, day.year, day.month, day.day, 8)
    assert leave_quiet(c, at(tz, day.year, day.month, day.day, 9)) == at(
        tz, day.year, day.month, day.day, 9
    )


def test_leave_quiet_at_an_end_that_the_clock_skips() -> None:
    c = cadence(BERLIN, quiet="01:00-02:30")  # 02:30 does not exist on 29 Mar 2026
    t = leave_quiet(c, at(BERLIN, 2026, 3, 29, 1, 30))
    assert wall(BERLIN, t).strftime("%H:%M%z") == "03:00+0200"  # the moment of the jump
    assert not in_quiet(c, t)


def test_leave_quiet_when_the_fall_back_replays_the_end() -> None:
    c = cadence(BERLIN, quiet="01:00-02:30")  # 02:00-03:00 happens twice on 25 Oct 2026
    replayed = at(BERLIN, 2026, 10, 25, 2, 10) + HOUR  # 02:10 CET, the second time round
    assert in_quiet(c, replayed)
    t = leave_quiet(c, replayed)
    assert wall(BERLIN, t).strftime("%H:%M%z") == "02:30+0100"


# --- next_look ---------------------------------------------------------------------------------------------

NOON = at(BERLIN, 2026, 6, 2, 12)  # a Tuesday


def look(c: Cadence, now: float, **kw: object) -> tuple[float, str]:
    args: dict[str, object] = {
        "proposed": None,
        "backoff": 0,
        "deadline": None,
        "snoozed_until": None,
    }
    args.update(kw)
    return next_look(c, now, **args)  # type: ignore[arg-type]


def test_next_look_follows_the_cadence_when_nothing_is_proposed() -> None:
    t, why = look(cadence(every_s=DAY), NOON)
    assert (t, why) == (NOON + DAY, "every 1d (the goal's cadence)")


def test_next_look_clamps_a_one_minute_proposal_to_the_minimum() -> None:
    t, why = look(cadence(), NOON, proposed=60)
    assert t == NOON + 4 * HOUR
    assert why == "model proposed 1m; clamped to the 4h minimum"


def test_a_model_proposing_one_minute_forever_gets_the_minimum_each_time() -> None:
    c, now, looks = cadence(quiet=None), NOON, []
    for _ in range(50):
        now, _ = look(c, now, proposed=60)
        looks.append(now)
    assert all(b - a == 4 * HOUR for a, b in zip([NOON, *looks], looks, strict=False))


def test_next_look_caps_a_long_proposal_at_the_maximum() -> None:
    t, why = look(cadence(), NOON, proposed=60 * DAY)
    assert t == NOON + 14 * DAY
    assert why == "model proposed 60d; capped at the 14d maximum"


def test_next_look_takes_a_proposal_inside_the_bounds() -> None:
    assert look(cadence(), NOON, proposed=2 * DAY) == (NOON + 2 * DAY, "model proposed 2d")


def test_backoff_is_exponential_up_to_the_maximum() -> None:
    c = cadence(every_s=DAY)
    gaps = [look(c, NOON, backoff=b)[0] - NOON for b in range(6)]
    assert gaps == [DAY, 2 * DAY, 4 * DAY, 8 * DAY, 14 * DAY, 14 * DAY]
    assert look(c, NOON, backoff=3)[1] == "3 nudges dismissed: backing off to 8d"
    assert look(c, NOON, backoff=5)[1] == "5 nudges dismissed: backing off to 14d (the maximum)"


def test_a_proposal_cannot_undercut_the_backoff() -> None:
    t, why = look(cadence(every_s=DAY), NOON, proposed=DAY, backoff=2)
    assert t == NOON + 4 * DAY
    assert why == "model proposed 1d; 2 nudges dismissed: backing off to 4d"


def test_snooze_pushes_the_next_look_to_its_end() -> None:
    until = NOON + 5 * DAY + 3 * HOUR
    t, why = look(cadence(), NOON, snoozed_until=until)
    assert t == until
    assert why == "snoozed until Sun 15:00"
    assert look(cadence(), NOON, snoozed_until=NOON + HOUR)[0] == NOON + DAY  # already over by then


def test_a_snooze_that_ends_in_quiet_hours_waits_for_the_morning() -> None:
    t, why = look(cadence(), NOON, snoozed_until=at(BERLIN, 2026, 6, 4, 23))
    assert t == at(BERLIN, 2026, 6, 5, 8)
    assert why == "snoozed until Thu 23:00; quiet hours until 08:00"


def test_next_look_leaves_quiet_hours_and_says_until_when() -> None:
    evening = at(BERLIN, 2026, 6, 2, 20)
    t, why = look(cadence(), evening, proposed=4 * HOUR)
    assert t == at(BERLIN, 2026, 6, 3, 8)
    assert why == "model proposed 4h; quiet hours until 08:00"


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
def test_daily_looks_across_both_transitions_stay_out_of_quiet_hours(tz: str) -> None:
    c = cadence(tz, every_s=DAY)
    for start in (SPRING[tz], FALL[tz]):
        now = at(tz, start.year, start.month, start.day) - 3 * DAY + 21.5 * HOUR  # 21:30
        for _ in range(8):
            now, _ = look(c, now, proposed=DAY + 0.25 * HOUR)
            assert not in_quiet(c, now)
            assert wall(tz, now).hour in range(8, 22)


def test_a_time_zone_change_keeps_looks_out_of_the_new_quiet_hours() -> None:
    agent = Checkin(every_s=DAY, min_s=4 * HOUR, max_s=14 * DAY, quiet="22:00-08:00", tz=BERLIN)
    berlin = cadence_from(agent, None)
    moved = cadence_from(agent, {"tz": NEW_YORK})  # the operator moved to New York
    now = at(BERLIN, 2026, 6, 2, 15)  # 15:00 in Berlin, 09:00 in New York
    t_berlin, _ = look(berlin, now, proposed=9 * HOUR)  # Berlin: 00:00 → quiet → 08:00 Berlin
    t_ny, _ = look(moved, now, proposed=9 * HOUR)  # New York: 18:00, fine there
    assert wall(BERLIN, t_berlin).strftime("%H:%M") == "08:00"
    assert wall(NEW_YORK, t_ny).strftime("%H:%M") == "18:00"
    late = look(moved, now, proposed=14 * HOUR)[0]  # 23:00 New York → its morning, not Berlin's
    assert wall(NEW_YORK, late).strftime("%H:%M") == "08:00"
    for _ in range(20):
        now, _ = look(moved, now, proposed=0.7 * DAY)
        assert not in_quiet(moved, now)


# --- deadlines ---------------------------------------------------------------------------------------------


def run_looks(c: Cadence, created: float, deadline: float, **kw: object) -> list[float]:
    """Every look from creation to the one at (or right after) the deadline."""
    now, looks = created, []
    first = True
    while now < deadline:
        now, _ = next_look(
            c,
            now,
            proposed=None,
            backoff=int(kw.get("backoff", 0)),  # type: ignore[call-overload]
            deadline=deadline,
            snoozed_until=None,
            looking_now=not first,
        )
        first = False
        looks.append(now)
        assert len(looks) < 50, "looks pile up"
    return looks


@pytest.mark.parametrize("tz", [BERLIN, NEW_YORK])
@pytest.mark.parametrize("created_h", [9, 14, 21])
@pytest.mark.parametrize("party_h", [0, 18, 23])
@pytest.mark.parametrize("backoff", [0, 2])
def test_a_party_next_saturday_gets_looks_spread_across_the_week(
    tz: str, created_h: int, party_h: int, backoff: int
) -> None:
    c = cadence(tz, every_s=3 * DAY)
    created = at(tz, 2026, 6, 6, created_h)  # a Saturday
    party = at(tz, 2026, 6, 13, party_h) + (
        DAY if party_h == 0 else 0
    )  # next Saturday (0 = midnight after)
    looks = run_looks(c, created, party, backoff=backoff)
    before = [t for t in looks if t < party]
    assert len(before) >= c.deadline_looks
    assert any(party - t > 2 * DAY for t in before)
    assert len({wall(tz, t).date() for t in before}) >= c.deadline_looks  # on different days
    assert all(b - a >= 16 * HOUR for a, b in itertools.pairwise(before))  # not crowded
    assert sum(party - t < DAY for t in before) <= 1  # at most one look in the last day
    assert before[0] - created < 3 * DAY  # the first look is not left to the end either
    assert not any(in_quiet(c, t) for t in looks)
    assert looks[-1] >= party and all(t < party for t in looks[:-1])  # one final look, right after
    assert looks[-1] <= leave_quiet(c, party)


def test_a_deadline_sixty_hours_away_still_gets_a_look_more_than_48h_before() -> None:
    c = cadence(BERLIN, every_s=3 * DAY)
    created = at(BERLIN, 2026, 6, 8, 10)
    deadline = created + 60 * HOUR
    looks = run_looks(c, created, deadline)
    assert deadline - looks[0] > 2 * DAY
    assert not in_quiet(c, looks[0])
    assert (
        "more than 48h before it"
        in next_look(
            c,
            created,
            proposed=None,
            backoff=0,
            deadline=deadline,
            snoozed_until=None,
            looking_now=False,
        )[1]
    )


def test_a_deadline_explains_itself() -> None:
    c = cadence(BERLIN, every_s=3 * DAY)
    t, why = look(c, at(BERLIN, 2026, 6, 6, 10), deadline=at(BERLIN, 2026, 6, 13, 18))
    assert why.startswith("deadline Sat 18:00 in 7d8h: looking every ")
    assert t < at(BERLIN, 2026, 6, 9)


def test_a_deadline_sooner_than_the_minimum_gets_its_last_look_on_time() -> None:
    c = cadence(BERLIN)
    now = at(BERLIN, 2026, 6, 2, 12)
    t, why = look(c, now, proposed=DAY, deadline=now + HOUR)
    assert t == now + HOUR  # min_s (4h) must not push it past the deadline
    assert why == "deadline Tue 13:00 in 1h: a last look at the deadline"


def test_a_deadline_inside_quiet_hours_gets_a_look_before_them_and_one_after() -> None:
    c = cadence(BERLIN, every_s=DAY)
    deadline = at(BERLIN, 2026, 6, 2, 23)  # Tuesday 23:00, quiet from 22:00
    now = at(BERLIN, 2026, 6, 2, 12)
    t, why = look(c, now, deadline=deadline)
    assert t == at(BERLIN, 2026, 6, 2, 21, 30)
    assert why == "deadline Tue 23:00 in 11h: a last look at Tue 21:30, before the quiet hours"
    t, why = look(c, t, deadline=deadline)
    assert t == at(BERLIN, 2026, 6, 3, 8)  # the one look after it, when the quiet hours end
    assert (
        why == "deadline Tue 23:00 in 1h30m: a last look at the deadline; quiet hours until 08:00"
    )


def test_a_far_deadline_does_not_change_the_pace() -> None:
    c = cadence(BERLIN, every_s=DAY)
    assert look(c, NOON, deadline=NOON + 60 * DAY) == (NOON + DAY, "every 1d (the goal's cadence)")


def test_a_passed_deadline_is_ignored() -> None:
    c = cadence(BERLIN, every_s=DAY)
    assert look(c, NOON, deadline=NOON - HOUR) == look(c, NOON)


def test_a_snooze_wins_over_a_deadline() -> None:
    c = cadence(BERLIN)
    until = NOON + 3 * DAY
    assert look(c, NOON, deadline=NOON + 2 * DAY, snoozed_until=until)[0] == until


ZONES = ["UTC", BERLIN, NEW_YORK, "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"]


@settings(max_examples=300, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    quiet=st.one_of(
        st.none(),
        st.tuples(st.integers(0, 1439), st.integers(0, 1439)).filter(lambda q: q[0] != q[1]),
    ),
    min_h=st.floats(0.1, 48),
    every_f=st.floats(1, 10),
    max_f=st.floats(1, 10),
    now=st.floats(1.70e9, 1.90e9),
    proposed=st.one_of(st.none(), st.floats(-1e4, 1e8)),
    backoff=st.integers(0, 12),
    deadline_h=st.one_of(st.none(), st.floats(-48, 24 * 60)),
    snooze_h=st.one_of(st.none(), st.floats(-48, 24 * 30)),
    looking_now=st.booleans(),
)
def test_next_look_keeps_its_promises(
    tz: str,
    quiet: tuple[int, int] | None,
    min_h: float,
    every_f: float,
    max_f: float,
    now: float,
    proposed: float | None,
    backoff: int,
    deadline_h: float | None,
    snooze_h: float | None,
    looking_now: bool,
) -> None:
    min_s = min_h * HOUR
    c = Cadence(min_s * every_f, min_s, min_s * every_f * max_f, quiet, tz)
    deadline = None if deadline_h is None else now + deadline_h * HOUR
    snoozed = None if snooze_h is None else now + snooze_h * HOUR
    t, why = next_look(
        c,
        now,
        proposed=proposed,
        backoff=backoff,
        deadline=deadline,
        snoozed_until=snoozed,
        looking_now=looking_now,
    )
    assert why
    assert not in_quiet(c, t)
    ahead = deadline if deadline is not None and deadline > now else None
    floor = now + c.min_s if ahead is None else min(now + c.min_s, ahead)
    assert t >= floor - 1e-6
    if snoozed is not None:
        assert t >= snoozed
    else:
        assert t <= leave_quiet(c, now + c.max_s) + 1e-6
        if ahead is not None:
            assert t <= leave_quiet(c, ahead) + 1e-6  # never after the deadline but its last look
