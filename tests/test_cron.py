"""Cron schedules read as Kubernetes reads them (robfig/cron v3's standard parser), and when they fire."""

from __future__ import annotations

import datetime

import pytest

from components.settings import cron

HOUR, DAY = datetime.timedelta(hours=1), datetime.timedelta(days=1)

# What robfig/cron's ParseStandard accepts (parser.go), with the times it means.
ACCEPTED = [
    ("0 */12 * * *", {0}, {0, 12}),
    ("*/15 3 * * *", {0, 15, 30, 45}, {3}),
    ("5/20 * * * *", {5, 25, 45}, set(range(24))),  # 'a/step' runs from a to the maximum
    ("10-20/5 1,2 * * *", {10, 15, 20}, {1, 2}),
    ("0 0 ? * MON-FRI", {0}, {0}),  # ? is *, names in any case
    ("0 0 1 jan,Jul *", {0}, {0}),
    ("@daily", {0}, {0}),
    ("@hourly", {0}, set(range(24))),
]

REFUSED = [
    ("", "found 0 field(s)"),
    ("* * * *", "found 4 field(s)"),
    ("0 0 * * * *", "found 6 field(s)"),  # no seconds field
    ("60 * * * *", "minute field: '60' is outside 0-59"),
    ("0 24 * * *", "hour field: '24' is outside 0-23"),
    ("0 0 0 * *", "day of month field: '0' is outside 1-31"),
    ("0 0 * 13 *", "month field: '13' is outside 1-12"),
    ("0 0 * * 7", "day of week field: '7' is outside 0-6"),  # robfig's bound; cron(8) would take 7
    ("0 0 * * mon-sun", "begins after its end"),
    ("*/0 * * * *", "step of '*/0' must be at least 1"),
    ("1-2-3 * * * *", "too many '-'"),
    ("1/2/3 * * * *", "too many '/'"),
    ("x * * * *", "'x' is not a number"),
    ("-1 * * * *", "not a number"),
    ("TZ=UTC 0 0 * * *", "time zone prefix is refused by Kubernetes"),
    ("@every 1h", "'@every' is not a descriptor Kubernetes runs at fixed times"),
    ("@fortnightly", "'@fortnightly' is not"),
    ("0 0 30 2 *", "never fires"),
    ("0 0 31 4,6,9,11 *", "never fires"),
]


@pytest.mark.parametrize(("text", "minutes", "hours"), ACCEPTED)
def test_accepted_schedules_and_what_they_mean(text: str, minutes: set[int], hours: set[int]) -> None:
    schedule = cron.parse(text)
    assert (set(schedule.minutes), set(schedule.hours)) == (minutes, hours)


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_refused_schedules_say_why_and_show_the_syntax(text: str, why: str) -> None:
    with pytest.raises(ValueError) as caught:
        cron.parse(text)
    assert why in str(caught.value)
    assert "five cron fields" in str(caught.value) or "never fires" in str(caught.value)


def test_day_of_month_and_day_of_week_either_match_when_both_are_restricted() -> None:
    # robfig's dayMatches (as cron(8)): the 13th, or any Friday.
    either = cron.parse("0 0 13 * 5")
    assert either.fires_on(datetime.date(2026, 3, 13)) and either.fires_on(datetime.date(2026, 3, 6))
    # With one field '*' both must match: Fridays only.
    assert not cron.parse("0 0 * * 5").fires_on(datetime.date(2026, 3, 13 + 1))
    # '*/2' is no '*' (a step drops the star): the odd days, or any Friday.
    stepped = cron.parse("0 0 */2 * 5")
    assert stepped.fires_on(datetime.date(2026, 3, 6)) and stepped.fires_on(datetime.date(2026, 3, 7))


@pytest.mark.parametrize(
    ("text", "shortest", "longest"),
    [
        ("0 */12 * * *", 12 * HOUR, 12 * HOUR),
        ("0 0 1 * *", 28 * DAY, 31 * DAY),
        ("0 0,1 * * *", HOUR, 23 * HOUR),
        ("0 0 * * 1-5", DAY, 3 * DAY),  # Friday to Monday
        ("0 0 29 2 *", 4 * 365 * DAY + DAY, 4 * 365 * DAY + DAY),
    ],
)
def test_gaps_between_runs(text: str, shortest: datetime.timedelta, longest: datetime.timedelta) -> None:
    schedule = cron.parse(text)
    assert (cron.shortest_gap(schedule), cron.longest_gap(schedule)) == (shortest, longest)


@pytest.mark.parametrize(
    ("text", "window", "runs"),
    [
        ("0 */12 * * *", 49 * HOUR, 5),  # 0, 12, 24, 36, 48
        ("0 */12 * * *", 48 * HOUR - datetime.timedelta(minutes=1), 4),
        ("0 0 13 * 5", 49 * HOUR, 2),  # a Thursday the 13th and the Friday after it
        ("0 0 1 * *", 49 * HOUR, 1),
    ],
)
def test_most_runs_within_a_window(text: str, window: datetime.timedelta, runs: int) -> None:
    assert cron.most_runs_within(cron.parse(text), window) == runs
