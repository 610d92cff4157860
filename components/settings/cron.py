"""Cron schedules as Kubernetes reads them, and when they fire.

The CronJob controller parses `spec.schedule` with robfig/cron v3's standard parser
(`cron.ParseStandard`: five fields, or a descriptor such as `@daily`) and API validation
refuses a `TZ=` prefix (the time zone is `spec.timeZone`); mariadb-operator's Backup
schedule is the same parser. `parse` accepts that syntax, as parser.go and spec.go of
robfig/cron define it: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or jan-dec,
day of week 0-6 or sun-sat; `*` or `?`, `a`, `a-b`, `a/step` (a to the maximum), `a-b/step`,
`*/step`, lists with `,`. A day matches when both day fields do, or either one when neither
starts with `*`/`?` (dayMatches). `@every <duration>` is refused: it fires relative to the
controller's start, not at times a setting can be checked against.

The program runs its CronJobs in UTC (`spec.timeZone: Etc/UTC`), so a schedule fires at the
same instants every year; `Firing` computes them over 28 years (the Gregorian calendar's
weekdays and leap years repeat after 28 years between 1901 and 2099) and answers what the
settings check: does it fire at all, the shortest and longest gap between two runs, and the
most runs within any window of a given length.
"""

from __future__ import annotations

import datetime
import itertools
import re
from dataclasses import dataclass
from functools import cache

TIME_ZONE = "Etc/UTC"
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MONTHS = {name: i for i, name in enumerate(_MONTH_NAMES, start=1)}
WEEKDAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
SYNTAX = (
    "a schedule is five cron fields 'minute hour day-of-month month day-of-week' such as '0 */12 * * *', "
    "or @hourly, @daily, @weekly, @monthly, @yearly (in UTC)"
)
_START = datetime.date(2001, 1, 1)
_DAYS = (datetime.date(2029, 1, 1) - _START).days  # 28 years
_MINUTES_PER_DAY = 24 * 60


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTHS),
    _Field("day of week", 0, 6, WEEKDAYS),
)


@dataclass(frozen=True)
class Schedule:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # the day-of-month field starts with * or ?
    any_weekday: bool

    def fires_on(self, day: datetime.date) -> bool:
        if day.month not in self.months:
            return False
        by_day, by_weekday = day.day in self.days, day.isoweekday() % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday

    @property
    def times_of_day(self) -> tuple[int, ...]:
        """Minutes after midnight at which it fires on a day it fires."""
        return tuple(sorted(h * 60 + m for h in self.hours for m in self.minutes))


def _number(text: str, field: _Field) -> int:
    if field.names and text.lower() in field.names:
        return field.names[text.lower()]
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"{field.name} field: {text!r} is not a number" + (" or a name" if field.names else ""))
    return int(text)


def _part(text: str, field: _Field) -> tuple[set[int], bool]:
    """One comma-separated part of a field: its values, and whether it counts as '*'."""
    range_and_step = text.split("/")
    if len(range_and_step) > 2:
        raise ValueError(f"{field.name} field: too many '/' in {text!r}")
    bounds = range_and_step[0].split("-")
    star = bounds[0] in ("*", "?")
    if star:
        start, end = field.low, field.high
    elif len(bounds) > 2:
        raise ValueError(f"{field.name} field: too many '-' in {text!r}")
    else:
        start = _number(bounds[0], field)
        end = _number(bounds[1], field) if len(bounds) == 2 else start
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], _Field(field.name, 0, 0))
        if len(bounds) == 1 and not star:
            end = field.high  # 'a/step' runs from a to the field's maximum
        star = star and step == 1
    if start < field.low or end > field.high:
        raise ValueError(f"{field.name} field: {text!r} is outside {field.low}-{field.high}")
    if start > end:
        raise ValueError(f"{field.name} field: {text!r} begins after its end")
    if step == 0:
        raise ValueError(f"{field.name} field: the step of {text!r} must be at least 1")
    return set(range(start, end + 1, step)), star


def _field(text: str, field: _Field) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for part in filter(None, text.split(",")):
        found, part_star = _part(part, field)
        values |= found
        star = star or part_star
    if not values:
        raise ValueError(f"{field.name} field is empty")
    return frozenset(values), star


@cache
def parse(text: str) -> Schedule:
    """The schedule, or ValueError saying what is wrong (the settings add the key)."""
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError(f"a time zone prefix is refused by Kubernetes; {SYNTAX}")
    if text.startswith("@"):
        if text not in DESCRIPTORS:
            raise ValueError(f"{text.split()[0]!r} is not a descriptor Kubernetes runs at fixed times; {SYNTAX}")
        fields = DESCRIPTORS[text].split()
    else:
        fields = text.split()
    if len(fields) != len(_FIELDS):
        raise ValueError(f"found {len(fields)} field(s); {SYNTAX}")
    try:
        (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = (
            _field(value, field) for value, field in zip(fields, _FIELDS, strict=True)
        )
    except ValueError as error:
        raise ValueError(f"{error}; {SYNTAX}") from None
    schedule = Schedule(text, minutes, hours, days, months, weekdays, any_day, any_weekday)
    if not _days(schedule):
        raise ValueError(f"never fires: no date matches {text!r}")
    return schedule


@cache
def _days(schedule: Schedule) -> tuple[int, ...]:
    """The days (counted from _START) on which the schedule fires."""
    return tuple(d for d in range(_DAYS) if schedule.fires_on(_START + datetime.timedelta(days=d)))


def _gaps(schedule: Schedule) -> list[int]:
    """Every different gap between two consecutive runs, in minutes."""
    times, days = schedule.times_of_day, _days(schedule)
    within = [b - a for a, b in itertools.pairwise(times)]
    # From a day's last run to the next run day's first.
    across = {(b - a) * _MINUTES_PER_DAY - times[-1] + times[0] for a, b in itertools.pairwise(days)}
    return within + sorted(across)


def shortest_gap(schedule: Schedule) -> datetime.timedelta:
    gaps = _gaps(schedule)
    return datetime.timedelta(minutes=min(gaps)) if gaps else datetime.timedelta.max


def longest_gap(schedule: Schedule) -> datetime.timedelta:
    """The longest time between two runs (for a schedule that fires once in 28 years, the 28 years)."""
    gaps = _gaps(schedule)
    return datetime.timedelta(minutes=max(gaps)) if gaps else datetime.timedelta(days=_DAYS)


MAX_FIRINGS = 500_000  # about hourly over the 28 years; more frequent schedules are refused before


@cache
def most_runs_within(schedule: Schedule, window: datetime.timedelta) -> int:
    """The most runs in any closed interval [t, t + window]."""
    times, days = schedule.times_of_day, _days(schedule)
    if len(times) * len(days) > MAX_FIRINGS:
        raise ValueError(f"{schedule.text!r} fires too often to count its runs")
    firings = [d * _MINUTES_PER_DAY + t for d in days for t in times]
    span = -(-window // datetime.timedelta(minutes=1))  # whole minutes, rounded up
    most, first = 0, 0
    for last, at in enumerate(firings):
        while firings[first] < at - span:
            first += 1
        most = max(most, last - first + 1)
    return most
