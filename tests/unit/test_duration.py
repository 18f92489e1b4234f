"""SkyWalking's Duration: its strings per step, its points (both ends
included, in skyoap's buckets and epoch ms), the 500-step bound and the
errors a client's mistakes get."""

from __future__ import annotations

import pytest

from skyoap.model.metrics import Downsampling
from skyoap.vocabulary.duration import Duration, DurationError, PointOfTime, Step

MINUTE_1900 = 1_795_287_600_000
"""2026-11-21 19:00 UTC in epoch ms."""


def test_minute_points_include_both_ends_and_cross_the_hour() -> None:
    points = Duration("2026-11-21 1858", "2026-11-21 1901", Step.MINUTE).points()
    assert points == (
        PointOfTime(202611211858, MINUTE_1900 - 120_000),
        PointOfTime(202611211859, MINUTE_1900 - 60_000),
        PointOfTime(202611211900, MINUTE_1900),
        PointOfTime(202611211901, MINUTE_1900 + 60_000),
    )


def test_hour_and_day_points() -> None:
    hours = Duration("2026-11-21 23", "2026-11-22 01", Step.HOUR).points()
    assert [p.bucket for p in hours] == [2026112123, 2026112200, 2026112201]
    assert hours[0].epoch_ms == MINUTE_1900 + 4 * 3_600_000
    days = Duration("2028-02-28", "2028-03-01", Step.DAY).points()  # a leap year
    assert [p.bucket for p in days] == [20280228, 20280229, 20280301]
    assert days[1].epoch_ms - days[0].epoch_ms == 86_400_000


def test_one_point_when_start_is_end() -> None:
    assert Duration("2026-11-21", "2026-11-21", Step.DAY).points() == (
        PointOfTime(20261121, 1_795_219_200_000),
    )


def test_buckets_of_the_ends_and_the_downsampling_of_each_step() -> None:
    duration = Duration("2026-11-21 1905", "2026-11-21 2010", Step.MINUTE)
    assert (duration.start_bucket, duration.end_bucket) == (202611211905, 202611212010)
    assert [s.downsampling() for s in (Step.MINUTE, Step.HOUR, Step.DAY)] == [
        Downsampling.MINUTE, Downsampling.HOUR, Downsampling.DAY,
    ]  # fmt: skip


def test_second_step_is_read_but_has_no_metrics() -> None:
    duration = Duration("2026-11-21 190500", "2026-11-21 190502", Step.SECOND)
    assert [p.bucket for p in duration.points()] == [20261121190500, 20261121190501, 20261121190502]
    with pytest.raises(DurationError) as e:
        duration.step.downsampling()
    assert str(e.value) == (
        "skyoap keeps metrics per minute, hour and day: the smallest step for metrics is MINUTE, not SECOND"
    )


@pytest.mark.parametrize(
    ("step", "end", "unit"),
    [
        (Step.MINUTE, "2026-11-22 0320", "minutes"),
        (Step.HOUR, "2026-12-12 15", "hours"),
        (Step.DAY, "2028-04-04", "days"),
    ],
)
def test_at_most_500_steps_from_start_to_end(step: Step, end: str, unit: str) -> None:
    start = {Step.MINUTE: "2026-11-21 1900", Step.HOUR: "2026-11-21 19", Step.DAY: "2026-11-21"}[step]
    longest = Duration(start, end, step).points()
    assert len(longest) == 501 and longest[-1].bucket == int(end.replace("-", "").replace(" ", ""))
    one_more = Duration(start, step.format(step.parse(end, "end") + step.width), step)
    with pytest.raises(DurationError) as e:
        one_more.points()
    assert str(e.value) == (
        f"Duration data error, the range between the start time and the end time can't exceed 500 {unit}"
    )
    # Ranges beyond the bound still have their end buckets (a top list reads them unbounded).
    assert one_more.end_bucket > one_more.start_bucket


@pytest.mark.parametrize(
    ("step", "text", "form", "example"),
    [
        (Step.MINUTE, "2026-11-21 19:05", "yyyy-MM-dd HHmm", "2026-11-21 1905"),
        (Step.MINUTE, "2026-11-21", "yyyy-MM-dd HHmm", "2026-11-21 1905"),
        (Step.HOUR, "2026-11-21 1905", "yyyy-MM-dd HH", "2026-11-21 19"),
        (Step.DAY, "2026/11/21", "yyyy-MM-dd", "2026-11-21"),
        (Step.DAY, "2026-02-30", "yyyy-MM-dd", "2026-11-21"),
        (Step.HOUR, "2026-11-21 24", "yyyy-MM-dd HH", "2026-11-21 19"),
        (Step.SECOND, "2026-11-21 1905", "yyyy-MM-dd HHmmss", "2026-11-21 190530"),
    ],
)
def test_a_malformed_string_says_the_form_of_its_step(step: Step, text: str, form: str, example: str) -> None:
    with pytest.raises(DurationError) as e:
        Duration(text, text, step)
    assert str(e.value) == (
        f"Duration start {text!r} is not a time of step {step.value}: it is written {form}, e.g. {example!r}"
    )


def test_an_end_before_the_start() -> None:
    with pytest.raises(DurationError) as e:
        Duration("2026-11-21 1905", "2026-11-21 1904", Step.MINUTE)
    assert str(e.value) == "Duration end '2026-11-21 1904' is before its start '2026-11-21 1905'"


def test_extended_back_starts_earlier_and_keeps_the_rest() -> None:
    duration = Duration("2026-11-21 0001", "2026-11-21 0002", Step.MINUTE, cold_stage=True)
    assert duration.extended_back(2) == Duration("2026-11-20 2359", "2026-11-21 0002", Step.MINUTE, True)


def test_a_duration_is_read_from_the_protocols_input() -> None:
    given = {"start": "2026-11-21 1900", "end": "2026-11-21 1904", "step": "MINUTE"}
    assert Duration.of(given) == Duration("2026-11-21 1900", "2026-11-21 1904", Step.MINUTE)
    assert Duration.of({**given, "coldStage": True}).cold_stage is True


def test_extended_back_is_bounded_and_stops_at_the_year_1() -> None:
    duration = Duration("0001-01-01 0002", "0001-01-01 0010", Step.MINUTE)
    assert duration.extended_back(2).start == "0001-01-01 0000"
    with pytest.raises(DurationError) as early:
        duration.extended_back(3)
    assert str(early.value) == "Duration start '0001-01-01 0002' less 3 minutes is before the year 1"
    with pytest.raises(DurationError) as far:
        duration.extended_back(2147483647)
    assert str(far.value) == (
        "a range of 2147483647 minutes reaches back further than the 500 steps one read may span"
    )


def test_years_before_1000_are_written_with_four_digits() -> None:
    duration = Duration("0005-01-01", "0005-01-02", Step.DAY)
    assert duration.extended_back(1) == Duration("0004-12-31", "0005-01-02", Step.DAY)
    assert duration.points()[0].bucket == 50101


def test_the_last_step_ends_at_most_at_the_last_instant_there_is() -> None:
    assert Duration("2026-11-21 1900", "2026-11-21 1904", Step.MINUTE).end_ms == 1795287900000
    assert Duration("9999-12-31", "9999-12-31", Step.DAY).end_ms == 253402300800000
