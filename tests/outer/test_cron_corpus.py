"""Cron and duration input checked against other implementations' test suites.

The cases below are copied (expectations unchanged) from:
- cronsim 2.7 (github.com/cuu508/cronsim, tests/test_cronsim.py, commit fd2e617): the bad values of
  `test_it_rejects_bad_values` in the five-field patterns, its other `test_it_rejects_*` cases
  that apply to five-field Vixie cron (not L, W, # nor a seconds field, which agentd does not
  take), the iterator cases without those features, and every `TestDstTransitions` case
  (Europe/Riga, 2021);
- croniter (github.com/kiorky/croniter, src/croniter/tests/test_croniter.py, commit d813502): the
  five-field expressions its tests reject.
agentd must refuse what they refuse, with its own message (never Python's `int()` text), and fire
when they fire — its DST rule is Vixie cron's, as cronsim's is (agentd/outer/schedule.py).
"""

from __future__ import annotations

from datetime import datetime
from itertools import product
from zoneinfo import ZoneInfo

import pytest

from agentd.outer import crontab
from agentd.outer.cadence import parse_duration
from agentd.outer.schedule import next_fire, parse_spec

_PATTERNS = (  # cronsim: the five-field patterns
    "%s * * * *",
    "* %s * * *",
    "* * %s * *",
    "* * * %s * ",
    "* * * * %s",
    "1-%s * * * *",
    "%s-60 * * * *",
    "* * 1-%s * *",
    "* * 1,%s * *",
    "* * %s/1 * *",
    "* * * %s-DEC *",
    "* * * JAN-%s *",
    "* * * * %s-SUN",
    "* * * * MON-%s",
)
_BAD_VALUES = ("-1", "61", "ABC", "2/", "/2", "2#", "#2", "1##1", "1//2", "¹", "LL", "LWX")
REFUSED = sorted(
    {p % v for p, v in product(_PATTERNS, _BAD_VALUES)}
    | {
        # cronsim test_it_rejects_*
        "* * * *",
        "* * 5-1 * *",
        "1-1_0 * * * *",
        "*/0 * * * *",
        "* * 30 2 *",
        "* * 31 4 *",
        "* * * * 5L-6",
        "* * * * 5L#1",
        "* * * * MONL",
        # croniter
        "0-1& * * * *",
        "0 * *",
        "* * * janu-jun *",
        "0 0 * * 1#0",
        "0 0 * * 1#7",
        "0 0 * * L-1",
        "0 0 * * L8",
        "? * * * *",
        "* ? * * *",
        "* * ?,* * *",
        "0-10000000 * * * *",
        "* * * * *,b",
        "0 0 0 0 0",
        "0 0 0 1 0",
        "4 0 L/2 2 0",
        # the lax forms of the outer-loop review: a trailing "/", other scripts' digits
        "2/ * * * *",
        "١ * * * *",
        "0 0 * * ٣",
        "*/² * * * *",
        "0 ٠-٥ * * *",
    }
)


@pytest.mark.parametrize("spec", REFUSED)
def test_what_other_crons_refuse_agentd_refuses_in_its_own_words(spec: str) -> None:
    with pytest.raises(ValueError) as refused:
        crontab.parse(spec)
    message = str(refused.value)
    assert message.startswith("cron"), message
    assert "invalid literal" not in message and "base 10" not in message


def test_a_trailing_slash_is_refused_not_read_as_no_step() -> None:
    with pytest.raises(ValueError, match=r'step "/" .* must be a positive number'):
        crontab.parse("2/ * * * *")
    with pytest.raises(ValueError, match=r'needs a start: write "\*/2"'):
        crontab.parse("/2 * * * *")


NOW = "2020-01-01T00:00:00"
ITERATED = [  # cronsim TestIterator, in UTC
    ("1 1 1-7 * */7", NOW, ["2020-01-05T01:01", "2020-02-02T01:01", "2020-03-01T01:01"]),
    ("1 1 */100,1-7 * MON", NOW, ["2020-01-06T01:01", "2020-02-03T01:01", "2020-03-02T01:01"]),
    ("1 1 * * */3", NOW, ["2020-01-01T01:01", "2020-01-04T01:01", "2020-01-05T01:01"]),
]

RIGA = "Europe/Riga"  # 2021: 03:00 → 04:00 on 28 Mar; 04:00 → 03:00 on 31 Oct
DST = [  # cronsim TestDstTransitions: (spec, start, fires), wall times with their UTC offset
    ("0 * * * *", "2021-03-28T01:30", ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00"]),
    (
        "0 * * * *",
        "2021-10-31T01:30",
        [
            "2021-10-31T02:00:00+03:00",
            "2021-10-31T03:00:00+03:00",
            "2021-10-31T03:00:00+02:00",
            "2021-10-31T04:00:00+02:00",
        ],
    ),
    (
        "*/30 * * * *",
        "2021-03-28T02:10",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "*/30 * * * *",
        "2021-10-31T02:10",
        [
            "2021-10-31T02:30:00+03:00",
            "2021-10-31T03:00:00+03:00",
            "2021-10-31T03:30:00+03:00",
            "2021-10-31T03:00:00+02:00",
            "2021-10-31T03:30:00+02:00",
            "2021-10-31T04:00:00+02:00",
        ],
    ),
    (
        "*/15 * * * *",
        "2021-03-28T02:40",
        ["2021-03-28T02:45:00+02:00", "2021-03-28T04:00:00+03:00"],
    ),
    (
        "*/15 * * * *",
        "2021-10-31T02:40",
        [
            "2021-10-31T02:45:00+03:00",
            "2021-10-31T03:00:00+03:00",
            "2021-10-31T03:15:00+03:00",
            "2021-10-31T03:30:00+03:00",
            "2021-10-31T03:45:00+03:00",
            "2021-10-31T03:00:00+02:00",
            "2021-10-31T03:15:00+02:00",
            "2021-10-31T03:30:00+02:00",
            "2021-10-31T03:45:00+02:00",
            "2021-10-31T04:00:00+02:00",
        ],
    ),
    (
        "0 */2 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T06:00:00+03:00"],
    ),
    (
        "0 */2 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-10-31T06:00:00+02:00"],
    ),
    (
        "30 */2 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "30 */2 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:30:00+03:00", "2021-10-31T04:30:00+02:00"],
    ),
    (
        "0 */3 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T06:00:00+02:00"],
    ),
    (
        "0 1,2,3,4,5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1,2,3,4,5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
    (
        "30 1,2,3,4,5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "30 1,2,3,4,5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:30:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T04:30:00+02:00"],
    ),
    ("0 2 * * *", "2021-03-28T01:30", ["2021-03-28T02:00:00+02:00", "2021-03-29T02:00:00+03:00"]),
    ("0 2 * * *", "2021-10-31T01:30", ["2021-10-31T02:00:00+03:00", "2021-11-01T02:00:00+02:00"]),
    (
        "0 3 * * *",
        "2021-03-27T01:30",
        ["2021-03-27T03:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:00:00+03:00"],
    ),
    ("0 3 * * *", "2021-10-31T01:30", ["2021-10-31T03:00:00+03:00", "2021-11-01T03:00:00+02:00"]),
    (
        "0 4 * * *",
        "2021-03-27T01:30",
        ["2021-03-27T04:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T04:00:00+03:00"],
    ),
    (
        "0 4 * * *",
        "2021-10-30T01:30",
        ["2021-10-30T04:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-11-01T04:00:00+02:00"],
    ),
    (
        "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
    (
        "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *",
        "2021-03-28T00:30",
        ["2021-03-28T01:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *",
        "2021-10-31T00:30",
        ["2021-10-31T01:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T05:00:00+02:00"],
    ),
    (
        "0 1-5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1-5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
]


def _fires(spec: str, tz: str, start: str, n: int) -> list[str]:
    s, zone = parse_spec("cron", spec, tz), ZoneInfo(tz)
    t, out = datetime.fromisoformat(start).replace(tzinfo=zone).timestamp(), []
    for _ in range(n):
        t = next_fire(s, t, goal_id=1)
        out.append(datetime.fromtimestamp(t, zone).isoformat())
    return out


@pytest.mark.parametrize(("spec", "start", "expected"), ITERATED)
def test_fires_where_cronsim_fires(spec: str, start: str, expected: list[str]) -> None:
    got = _fires(spec, "UTC", start, len(expected))
    assert got == [e + ":00+00:00" for e in expected]


@pytest.mark.parametrize(("spec", "start", "expected"), DST)
def test_fires_where_cronsim_fires_across_dst(spec: str, start: str, expected: list[str]) -> None:
    assert _fires(spec, RIGA, start, len(expected)) == expected


@pytest.mark.parametrize("text", ["٣h", "٣", "1_000", "1e3", "nan", "inf", "-1d", "²m", "1.5.2h"])
def test_a_lax_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not valid: write e\.g\. 90s"):
        parse_duration(text)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("1.5h", 5400), ("1d12h", 129600)])
def test_plain_durations_still_read(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_quiet_hours_in_other_scripts_digits_are_refused() -> None:
    from agentd.outer.cadence import parse_quiet

    assert parse_quiet("22:00-07:00") is not None
    with pytest.raises(ValueError):
        parse_quiet("٢٢:٠٠-٠٧:٠٠")
