"""Metrics values: merging, percentiles, the remote form, and L2's exactly-once
merge into stored minutes, hours and days when storage fails."""

from __future__ import annotations

from aggregator.metrics import MetricsPersistentWorker
from model.metrics import (
    LATENCY_BUCKETS_MS,
    Downsampling,
    EndpointMetrics,
    MeterMetrics,
    ServiceMetrics,
    latency_bucket,
    minute_bucket,
)
from runtime.buffer import BufferSpec, BufferStrategy
from runtime.instruments import Instruments
from runtime.pools import DrainPool
from tests.unit.fakes import MemoryMetricsDAO


def one_call(latency_ms: int) -> tuple[int, ...]:
    histogram = [0] * len(LATENCY_BUCKETS_MS)
    histogram[latency_bucket(latency_ms)] = 1
    return tuple(histogram)


def calls(bucket: int, *latencies: int, errors: int = 0) -> ServiceMetrics:
    value = ServiceMetrics(time_bucket=bucket, service="shop")
    for i, ms in enumerate(latencies):
        one = ServiceMetrics(
            time_bucket=bucket,
            service="shop",
            calls=1,
            errors=int(i < errors),
            latency_sum_ms=ms,
            histogram=one_call(ms),
        )
        value = value.combine(one)
    return value


def test_buckets_and_percentiles() -> None:
    assert minute_bucket(1_795_287_900_000) == 202611211905  # 2026-11-21 19:05 UTC
    assert Downsampling.HOUR.of_minute(202611211905) == 2026112119
    assert Downsampling.DAY.of_minute(202611211905) == 20261121
    assert [latency_bucket(ms) for ms in (0, 1, 4, 5, 59_999, 60_000, 10**9)] == [0, 1, 3, 4, 27, 28, 28]
    value = calls(202611211905, *range(1, 101), errors=3)
    assert (value.calls, value.errors, value.latency_sum_ms) == (100, 3, 5050)
    # rank 50 is 50 ms, in [50, 70); rank 99 is 99 ms, in [70, 100); rank 100 would be 100.
    assert [value.percentile(p) for p in (50, 75, 90, 95, 99)] == [50, 70, 70, 70, 70]
    assert value.derived() == {
        "latency_avg_ms": 50.5, "success_rate": 0.97, "p50": 50, "p75": 70, "p90": 70, "p95": 70, "p99": 70,
    }  # fmt: skip
    assert ServiceMetrics(time_bucket=1, service="idle").derived()["success_rate"] == 1.0


def test_remote_form_keeps_lists_maps_and_floats_exactly() -> None:
    call = EndpointMetrics(
        time_bucket=202611211905, service="shop", endpoint="GET:/", calls=2, errors=1, latency_sum_ms=7,
        histogram=one_call(3),
    )  # fmt: skip
    assert EndpointMetrics.from_remote(*call.to_remote()) == call
    meter = MeterMetrics(
        time_bucket=202611211905, service="shop", instance="i", name="cpu", labels="core=0", samples=3,
        value_sum=0.1 + 0.2, last_value=-1e-300, last_time=5, buckets={"-inf": "1", "0.5": "2"},
    )  # fmt: skip
    assert MeterMetrics.from_remote(*meter.to_remote()) == meter


def test_l2_adds_each_delta_once_at_every_level_when_one_level_fails() -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    pool = DrainPool("test", 1, instruments)
    worker = MetricsPersistentWorker(
        1,
        "service_metrics_l2",
        ServiceMetrics,
        dao,
        pool,
        instruments,
        BufferSpec(1, 100, BufferStrategy.BLOCKING),
        max_pending=100,
    )
    worker.handle_batch([calls(202611211905, 10, 20), calls(202611211906, 30)])
    dao.down = {Downsampling.HOUR}
    worker.persist()
    minute = dao.values(ServiceMetrics, Downsampling.MINUTE)
    assert sorted((v.time_bucket, v.calls) for v in minute.values()) == [(202611211905, 2), (202611211906, 1)]
    assert dao.values(ServiceMetrics, Downsampling.HOUR) == {}
    assert [v.calls for v in dao.values(ServiceMetrics, Downsampling.DAY).values()] == [3]

    dao.down = set()
    worker.handle_batch([calls(202611211906, 40)])
    worker.persist()
    minute = dao.values(ServiceMetrics, Downsampling.MINUTE)
    assert sorted((v.time_bucket, v.calls, v.latency_sum_ms) for v in minute.values()) == [
        (202611211905, 2, 30), (202611211906, 2, 70),
    ]  # fmt: skip
    (hour,) = dao.values(ServiceMetrics, Downsampling.HOUR).values()
    (day,) = dao.values(ServiceMetrics, Downsampling.DAY).values()
    assert (hour.time_bucket, hour.calls, hour.latency_sum_ms) == (2026112119, 4, 100)
    assert (day.time_bucket, day.calls, day.latency_sum_ms) == (20261121, 4, 100)
    assert (
        instruments.value("skyoap_worker_dropped_total", worker="service_metrics_l2", reason="refused") == 0
    )
