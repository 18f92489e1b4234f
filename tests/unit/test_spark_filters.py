"""Which of Spark's filters a topic read runs in the storage, and the exact
bounds they become: entries are published to the millisecond, filters
compare microseconds."""

from __future__ import annotations

import datetime

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

from skyoap.analytics.source import Pushed, _spans
from skyoap.model.topics import Bounds, Where

COLUMNS = {"partition", "timestamp", "service", "endpoint", "time_bucket"}
AT = datetime.datetime(2026, 11, 23, 9, 0, 0, 500, tzinfo=datetime.UTC)  # 0.5 ms past a millisecond
AT_MS = 1795424400000


def pushed(*filters: object) -> tuple[Pushed, list[object]]:
    p = Pushed()
    left = [f for f in filters if not p.take(f, COLUMNS)]  # type: ignore[arg-type]
    return p, left


def test_timestamps_become_whole_milliseconds_on_the_right_side() -> None:
    assert pushed(GreaterThan(("timestamp",), AT))[0].where() == Where(published=(AT_MS + 1, None))
    assert pushed(GreaterThanOrEqual(("timestamp",), AT))[0].where() == Where(published=(AT_MS + 1, None))
    assert pushed(LessThan(("timestamp",), AT))[0].where() == Where(published=(None, AT_MS))
    assert pushed(LessThanOrEqual(("timestamp",), AT))[0].where() == Where(published=(None, AT_MS))
    # Equal to a time between two milliseconds: no entry can be.
    assert pushed(EqualTo(("timestamp",), AT))[0].where() == Where(published=(AT_MS + 1, AT_MS))
    whole = AT.replace(microsecond=0)
    assert pushed(EqualTo(("timestamp",), whole))[0].where() == Where(published=(AT_MS, AT_MS))
    naive = whole.replace(tzinfo=None)  # read as UTC
    assert pushed(GreaterThan(("timestamp",), naive))[0].where() == Where(published=(AT_MS + 1, None))


def test_filters_on_one_column_narrow_each_other() -> None:
    p, left = pushed(
        In(("service",), ("a", "b")),
        EqualTo(("service",), "b"),
        GreaterThan(("time_bucket",), 202611230900),
        LessThanOrEqual(("time_bucket",), 202611231000),
        LessThan(("time_bucket",), 202611230959),
    )
    assert left == []
    assert p.where() == Where({"service": frozenset({"b"})}, {"time_bucket": (202611230901, 202611230958)})


def test_partitions_are_picked_and_other_filters_are_left_to_spark() -> None:
    other = [
        Not(EqualTo(("service",), "a")),
        IsNull(("endpoint",)),
        EqualTo(("trace_id",), "t"),
        In(("timestamp",), (AT,)),
    ]
    p, left = pushed(In(("partition",), (1, 2, 3)), GreaterThan(("partition",), 1), *other)
    assert left == other
    assert p.where() is None
    bounds = {n: Bounds(n, 0, 10) for n in range(4)}
    assert sorted(p.partitions(bounds)) == [2, 3]


def test_offsets_are_split_until_there_are_min_partitions() -> None:
    spans = [s.value for s in _spans({0: (0, 100), 1: (10, 10), 2: (0, 50)}, 6)]
    assert spans == [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (2, 0, 25), (2, 25, 50)]
    assert [s.value for s in _spans({0: (5, 9), 1: (0, 3)}, 0)] == [(0, 5, 9), (1, 0, 3)]


def test_a_topic_cannot_be_filtered_by_other_columns() -> None:
    with pytest.raises(
        ValueError, match=r"a topic cannot be filtered by trace_id; only by service, endpoint"
    ):
        Where({"trace_id": frozenset({"t"})})
