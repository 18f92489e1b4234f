"""Meters: the checks every meter passes at the receiver and at the
RemoteService, sums that would overflow left out at every merge (L1, L2 and
the stored row) with the stored value kept, and times judged only by the
receiver that took the telemetry."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from skyoap.aggregator.metrics import MetricsPersistentWorker
from skyoap.model import sketch
from skyoap.model.checks import Reason, Refused
from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import (
    METRICS_TYPES,
    Downsampling,
    MeterMetrics,
    ServiceMetrics,
    add_to,
    merge_into,
    minute_bucket,
    not_finite,
)
from skyoap.model.stream import Stage, StreamData, StreamTypes, worker_id
from skyoap.receiver.aggregate import MetricsAggregateWorker
from skyoap.receiver.config import LimitsConfig
from skyoap.remote.grpc_client import encode_batch
from skyoap.remote.service import RemoteService
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.worker import Workers
from tests.unit.fakes import Collect, MemoryMetricsDAO

LIMITS = LimitsConfig().items()
NOW_MS = 1_795_287_912_345  # 2026-11-21 19:05:12.345 UTC
MINUTE = minute_bucket(NOW_MS)
BIG = 1.5e308
"""A float whose double passes the largest one (about 1.8e308)."""


def meter(value: float = 1.0, at_ms: int = NOW_MS, **changes: Any) -> MeterMetrics:
    m = MeterMetrics(
        time_bucket=minute_bucket(at_ms), service="shop", instance="shop-1", name="queue", labels="",
        samples=1, value_sum=value, last_value=value, last_time=at_ms,
    )  # fmt: skip
    return replace(m, **changes)


def call(minute: int) -> ServiceMetrics:
    """One call of 5 ms to the service shop in ``minute``."""
    histogram = sketch.of_latencies([5])
    return ServiceMetrics(time_bucket=minute, service="shop", calls=1, latency_sum_ms=5, histogram=histogram)


def refusal(item: StreamData, now_ms: int = NOW_MS) -> tuple[Reason, str]:
    with pytest.raises(Refused) as e:
        item.check(LIMITS, now_ms)
    return e.value.reason, str(e.value)


def test_a_histogram_is_refused_for_a_negative_count_or_a_bound_that_is_no_finite_number() -> None:
    good = meter(4.0, buckets={"-inf": "1", "0.5": "3"})
    good.check(LIMITS, NOW_MS)
    described = f"meter_metrics 'shop shop-1 queue ' at {MINUTE}"
    assert refusal(replace(good, buckets={"-inf": "1", "0.5": "-3"})) == (
        Reason.INCONSISTENT,
        f"{described} counts '-3' in its bucket '0.5': 0 or more",
    )
    assert refusal(replace(good, buckets={"-inf": "1", "0.5": "²"}))[0] is Reason.INCONSISTENT
    for bound in ("nan", "inf", "-infinity", "1e999"):
        assert refusal(replace(good, buckets={"-inf": "1", bound: "3"})) == (
            Reason.NOT_A_NUMBER,
            f"{described} has a bucket bounded by {bound!r}: a bound is a finite number "
            "(or -inf, the first bucket's)",
        )


def test_a_meter_is_refused_when_its_last_report_is_not_in_its_minute() -> None:
    reason, message = refusal(meter(last_time=NOW_MS + 60_000))
    assert reason is Reason.INCONSISTENT
    assert message.endswith(f"was last reported at {NOW_MS + 60_000} ms since the epoch, not in its minute")


def test_a_metrics_minute_is_not_judged_by_the_clock_of_whoever_checks_it() -> None:
    """The receiver judged the telemetry's time when it took it; an aggregator
    whose clock is days apart, or that gets the value late, takes it."""
    week_ms = 7 * 86_400_000
    for now_ms in (NOW_MS - week_ms, NOW_MS + week_ms):
        meter().check(LIMITS, now_ms)
        call(MINUTE).check(LIMITS, now_ms)
    assert refusal(call(202611211961)) == (
        Reason.INCONSISTENT,
        "the time bucket of service_metrics 202611211961 is not a minute (yyyyMMddHHmm)",
    )


def test_a_sum_that_would_overflow_is_refused_and_the_value_kept() -> None:
    big = meter(BIG)
    with pytest.raises(Refused) as e:
        big.combine(meter(BIG, at_ms=NOW_MS + 1))
    assert e.value.reason is Reason.OVERFLOW
    assert str(e.value).endswith(
        f"its sum {BIG!r} added to the {BIG!r} of the others would pass the largest number a float holds"
    )
    totals: dict[str, MeterMetrics] = {}
    add_to(totals, big)
    with pytest.raises(Refused):
        add_to(totals, meter(BIG, at_ms=NOW_MS + 1))
    assert totals == {big.key(): big}
    add_to(totals, meter(-BIG, at_ms=NOW_MS + 2))
    assert (totals[big.key()].samples, totals[big.key()].value_sum) == (2, 0.0)


def test_merging_leaves_out_each_value_that_would_overflow_and_keeps_the_rest() -> None:
    held = meter(BIG)
    target = {held.key(): held}
    late = [meter(BIG, at_ms=NOW_MS + 1), meter(-1.0, at_ms=NOW_MS + 2), meter(BIG, at_ms=NOW_MS + 3)]
    other = meter(BIG, name="other")
    refused = merge_into(target, [*late, other])
    assert [(m, e.reason) for m, e in refused] == [(late[0], Reason.OVERFLOW), (late[2], Reason.OVERFLOW)]
    kept = target[held.key()]
    assert (kept.samples, kept.value_sum, kept.last_value, kept.last_time) == (2, BIG - 1.0, -1.0, NOW_MS + 2)
    assert target[other.key()] == other
    assert merge_into(target, [meter(2.0, name="other", at_ms=NOW_MS + 1)]) == []


def test_a_row_with_a_number_that_is_not_finite_is_named() -> None:
    assert not_finite(meter(BIG).to_row()) is None
    assert not_finite(replace(meter(BIG), value_sum=float("inf")).to_row()) == (
        "value_sum is inf: no storage keeps a number that is not finite"
    )


def l1_worker(out: Collect[MeterMetrics], instruments: Instruments) -> MetricsAggregateWorker:
    return MetricsAggregateWorker(
        1, "meter_metrics_l1", out, DrainPool("L1", 1, instruments), instruments,  # type: ignore[arg-type]
        BufferSpec(1, 100, BufferStrategy.BLOCKING), flush_period_s=0.0,
    )  # fmt: skip


def test_l1_leaves_out_and_counts_a_value_whose_sum_would_overflow() -> None:
    out: Collect[MeterMetrics] = Collect()
    instruments = Instruments()
    worker = l1_worker(out, instruments)
    worker.handle_batch([meter(BIG), meter(BIG, at_ms=NOW_MS + 1), meter(2.0, at_ms=NOW_MS + 2)])
    assert [(m.samples, m.value_sum, m.last_value) for m in out.items] == [(2, BIG + 2.0, 2.0)]
    dropped = instruments.value("skyoap_worker_dropped_total", worker="meter_metrics_l1", reason="overflow")
    assert dropped == 1


def l2_worker(dao: MemoryMetricsDAO, instruments: Instruments) -> MetricsPersistentWorker:
    return MetricsPersistentWorker(
        1, "meter_metrics_l2", MeterMetrics, dao, DrainPool("test", 1, instruments), instruments,
        BufferSpec(1, 100, BufferStrategy.BLOCKING), max_held_bytes=10**9,
    )  # fmt: skip


def test_l2_keeps_the_stored_row_when_a_delta_would_overflow_it() -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    worker = l2_worker(dao, instruments)
    first = meter(BIG)
    worker.handle_batch([first])
    worker.persist()
    worker.handle_batch([meter(BIG, at_ms=NOW_MS + 1), meter(1.0, name="other")])
    worker.persist()
    for level in Downsampling:
        rows = {m.name: m for m in dao.values(MeterMetrics, level).values()}
        assert (rows["queue"].samples, rows["queue"].value_sum, rows["queue"].last_time) == (1, BIG, NOW_MS)
        assert (rows["other"].samples, rows["other"].value_sum) == (1, 1.0)
    # Left out once per level, and not tried again.
    dropped = instruments.value("skyoap_worker_dropped_total", worker="meter_metrics_l2", reason="overflow")
    assert dropped == 3
    assert all(
        instruments.value("skyoap_metrics_pending", worker="meter_metrics_l2", level=level.value) == 0
        for level in Downsampling
    )
    # A value that fits is still added.
    worker.handle_batch([meter(-BIG, at_ms=NOW_MS + 2)])
    worker.persist()
    day = {m.name: m for m in dao.values(MeterMetrics, Downsampling.DAY).values()}
    assert (day["queue"].samples, day["queue"].value_sum) == (2, 0.0)


def test_l2_leaves_out_a_minute_whose_sum_with_the_others_of_its_day_would_overflow() -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    worker = l2_worker(dao, instruments)
    worker.handle_batch([meter(BIG), meter(BIG, at_ms=NOW_MS + 60_000)])
    worker.persist()
    minutes = sorted(
        (m.time_bucket, m.value_sum) for m in dao.values(MeterMetrics, Downsampling.MINUTE).values()
    )
    assert minutes == [(MINUTE, BIG), (MINUTE + 1, BIG)]
    for level in (Downsampling.HOUR, Downsampling.DAY):
        assert [(m.samples, m.value_sum) for m in dao.values(MeterMetrics, level).values()] == [(1, BIG)]
    assert instruments.value("skyoap_worker_dropped_total", worker="meter_metrics_l2", reason="overflow") == 2


def test_the_remote_service_takes_values_whose_minute_its_own_clock_would_judge_otherwise() -> None:
    workers = Workers()
    sinks = {m: Collect[StreamData](worker_id(m, Stage.L2)) for m in (*INVENTORY_TYPES, *METRICS_TYPES)}
    for sink in sinks.values():
        workers.register(sink)
    service = RemoteService(
        workers, StreamTypes((*INVENTORY_TYPES, *METRICS_TYPES)), Instruments(), limits=LIMITS
    )
    now_ms = int(time.time() * 1000)
    day_ms = 86_400_000
    items: list[StreamData] = []
    for at_ms in (now_ms - 10 * day_ms, now_ms + 2 * day_ms):  # past --telemetry-max-age-s, and ahead
        items.append(call(minute_bucket(at_ms)))
        items.append(meter(at_ms=at_ms))
    items.append(meter(buckets={"-inf": "1", "0.5": "-3"}))  # the form is still checked
    reasons = service._take_batch(encode_batch([(worker_id(type(i), Stage.L2), i) for i in items]))
    assert [r.split(":")[0] if r else None for r in reasons] == [None, None, None, None, "inconsistent"]
    assert sinks[ServiceMetrics].items == items[0:3:2]
    assert sinks[MeterMetrics].items == items[1:4:2]
