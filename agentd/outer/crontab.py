"""A crontab expression, parsed and validated: five fields "minute hour day-of-month month
day-of-week" with names, ranges, lists and steps, and the @daily-style macros. Vixie cron's
reading: 0 and 7 are Sunday; day-of-month and day-of-week are OR-ed when both are restricted (a
field is unrestricted when it starts with "*", so "*/2" is unrestricted too). Numbers are ASCII
digits only; a step needs a number after "/" and a start before it. Errors say what to write
instead. When its fires fall (time zones, DST) is `schedule`'s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date

_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {n: i + 1 for i, n in enumerate(_MONTHS)},
    {n: i for i, n in enumerate(_DAYS)},
)
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * sun",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # at most, Feb in leap years
_HELP = (
    'a crontab has 5 fields "minute hour day-of-month month day-of-week", '
    'e.g. "0 9 * * mon-fri" (09:00 on weekdays) or "30 7 1 * *" (07:30 on the 1st)'
)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]  # 0 = Sunday
    dom_any: bool  # the field starts with "*" (Vixie: then day-of-month and day-of-week AND)
    dow_any: bool
    every_hour: bool  # hour field starts with "*" ("*", "*/3"): fire every real hour it names
    day_seconds: tuple[int, ...]  # sorted h*3600 + m*60 of the fires in a day

    def matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom, dow = d.day in self.doms, (d.weekday() + 1) % 7 in self.dows
        if self.dom_any or self.dow_any:
            return dom and dow
        return dom or dow


def _number(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes "١" and "²", which int() reads or refuses."""
    return text.isascii() and text.isdigit()


def _value(text: str, i: int, spec: str) -> int:
    lo, hi = _RANGES[i]
    if text in _NAMES[i]:
        return _NAMES[i][text]
    if not text:
        raise ValueError(
            f'cron {_FIELDS[i]} in "{spec}" has an empty value: write a number {lo}-{hi} on each '
            'side of "-" and ","'
        )
    if not _number(text):
        names = " ".join(_NAMES[i]) or f"numbers {lo}-{hi}"
        raise ValueError(f'cron {_FIELDS[i]} "{text}" in "{spec}" is not valid: use {names}')
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f'cron {_FIELDS[i]} {value} in "{spec}" is out of range {lo}-{hi}')
    return value


def _field(text: str, i: int, spec: str) -> frozenset[int]:
    lo, hi = _RANGES[i]
    out: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _number(step_text) or int(step_text) == 0:
                raise ValueError(
                    f'cron step "/{step_text}" in "{spec}" must be a positive number, e.g. "*/15"'
                )
            if not base:
                raise ValueError(
                    f'cron step "{item}" in "{spec}" needs a start: write "*/{step_text}" '
                    f'or e.g. "{lo}-{hi}/{step_text}"'
                )
            step = int(step_text)
        if base == "*":
            first, last = lo, hi
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _value(a, i, spec), _value(b, i, spec)
            if first > last:
                raise ValueError(
                    f'cron range "{base}" in "{spec}" runs backwards: split it, e.g. "fri-sat,sun-mon"'
                )
        else:
            first = _value(base, i, spec)
            last = hi if slash else first  # "5/15" means 5-59/15
        out.update(range(first, last + 1, step))
    if i == 4 and 7 in out:  # 7 is Sunday too
        out = (out - {7}) | {0}
    return frozenset(out)


@functools.lru_cache(maxsize=256)
def parse(spec: str) -> Cron:
    text = _MACROS.get(spec.strip().lower(), spec.strip().lower())
    if text.startswith("@"):
        raise ValueError(f'cron macro "{spec}" is not supported: use one of {" ".join(_MACROS)}')
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(f'cron "{spec}" has {len(parts)} fields; {_HELP}')
    minutes, hours, doms, months, dows = (_field(p, i, spec) for i, p in enumerate(parts))
    cron = Cron(
        minutes=minutes,
        hours=hours,
        doms=doms,
        months=months,
        dows=dows,
        dom_any=parts[2].startswith("*"),
        dow_any=parts[4].startswith("*"),
        every_hour=parts[1].startswith("*"),
        day_seconds=tuple(sorted(h * 3600 + m * 60 for h in hours for m in minutes)),
    )
    # with day-of-week unrestricted, the day-of-month must exist in some month listed
    if (cron.dom_any or cron.dow_any) and not any(
        d <= _MONTH_DAYS[m - 1] for m in months for d in doms
    ):
        raise ValueError(f'cron "{spec}" never fires: no month listed has that day-of-month')
    return cron


def normal(spec: str) -> str:
    """The spec with day-of-week numbers written as names, so that any cron reader (APScheduler
    numbers weekdays 0=Monday) reads the same days."""
    text = _MACROS.get(spec.strip().lower(), spec.strip().lower())
    parts = text.split()
    if parts[4].startswith("*") or not any(_number(ch) for ch in parts[4].split("/")[0]):
        return " ".join(parts)
    days = sorted(parse(spec).dows)
    runs: list[list[int]] = []
    for d in days:
        if runs and runs[-1][-1] == d - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    names = [_DAYS[r[0]] if len(r) == 1 else f"{_DAYS[r[0]]}-{_DAYS[r[-1]]}" for r in runs]
    return " ".join([*parts[:4], ",".join(names)])
