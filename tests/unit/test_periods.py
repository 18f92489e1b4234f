"""The time series of Elasticsearch indices: which indices a time range
reads, and which ones lie wholly before a day."""

from __future__ import annotations

import datetime

from skyoap.model.metrics import Downsampling
from skyoap.storage.elasticsearch.client import Period
from skyoap.storage.elasticsearch.metrics import PERIODS


def test_a_range_reads_the_index_of_each_period_it_touches() -> None:
    assert Period.DAY.indices("m", 202611302359, 2026120200) == "m-20261130,m-20261201,m-20261202"
    assert Period.MONTH.indices("m", 20261130, 20270105) == "m-20261101,m-20261201,m-20270101"
    assert Period.MONTH.index("m", 202602281200) == "m-20260201"
    assert Period.DAY.index("m", 202602301200) is None  # no such day


def test_a_range_of_no_real_day_or_of_too_many_periods_reads_every_index() -> None:
    assert Period.DAY.indices("m", 0, 20261121) == "m-*"
    assert Period.DAY.indices("m", 20261121, 20261120) == "m-*"
    assert Period.DAY.indices("m", 20260101, 20261231) == "m-*"
    assert Period.MONTH.indices("m", 20200101, 20261231) == "m-*"


def test_only_indices_wholly_before_the_day_are_old() -> None:
    names = ["m-20261031", "m-20261101", "m-20261130", "m-other", "m-20261301"]
    assert Period.DAY.before(names, datetime.date(2026, 11, 30)) == ["m-20261031", "m-20261101"]
    months = ["m-20261001", "m-20261101", "m-20261201"]
    assert Period.MONTH.before(months, datetime.date(2026, 11, 30)) == ["m-20261001"]
    assert Period.MONTH.before(months, datetime.date(2026, 12, 1)) == ["m-20261001", "m-20261101"]


def test_minutes_and_hours_go_by_the_day_and_days_by_the_month() -> None:
    assert PERIODS == {
        Downsampling.MINUTE: Period.DAY,
        Downsampling.HOUR: Period.DAY,
        Downsampling.DAY: Period.MONTH,
    }
