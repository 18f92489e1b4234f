"""Metrics values: merging, percentiles, the remote form, and L2's exactly-once
merge into stored minutes, hours and days when storage fails."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from skyoap.aggregator.metrics import MetricsPersistentWorker
from skyoap.model import sketch
from skyoap.model.checks import Refused
from skyoap.model.metrics import (
    SEP,
    ApdexThresholds,
    Downsampling,
    EndpointMetrics,
    MeterMetrics,
    Metrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.model.spans import Segment, Span
from skyoap.receiver.segments import measure
from skyoap.runtime.budget import memory_size
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from tests.unit.fakes import MemoryMetricsDAO
from tests.unit.test_meter_checks import LIMITS


def one_call(latency_ms: int) -> tuple[int, ...]:
    return sketch.of_latencies([latency_ms])


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
    value = calls(202611211905, *range(1, 101), errors=3)
    assert (value.calls, value.errors, value.latency_sum_ms) == (100, 3, 5050)
    # Rank 50 is 50 ms, rank 99 is 99 ms: below 100 ms the sketch holds each whole ms apart.
    assert [value.percentile(p) for p in (50, 75, 90, 95, 99)] == [50, 75, 90, 95, 99]
    # SkyWalking's names: calls per minute, mean ms (whole), sla in 1/100 %; no apdex counted here.
    assert value.derived() == {
        "cpm": 100.0, "resp_time": 50, "sla": 9700, "p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99,
        "apdex": 0,
    }  # fmt: skip
    assert [value.downsampled(level).cpm for level in Downsampling] == [100.0, 100 / 60, 100 / 1440]
    idle = ServiceMetrics(time_bucket=202611211905, service="idle").derived()
    assert (idle["sla"], idle["resp_time"], idle["apdex"]) == (10_000, 0, 10_000)


def test_apdex_counts_each_services_calls_by_its_threshold() -> None:
    thresholds = ApdexThresholds.parse(
        "# as SkyWalking's service-apdex-threshold.yml\ndefault: 100\nslow: 1000  # a batch service\n",
        "apdex.yml",
    )
    assert (thresholds.of("shop"), thresholds.of("slow")) == (100, 1000)
    span = Span(0, 0, 0, 0, "GET /", "", False, False, (), 0)
    latencies = [100, 101, 400, 401]  # satisfied, tolerating, tolerating, frustrated at T = 100
    failed = span._replace(end_time=1, is_error=True)  # frustrated
    shop_spans = (*(span._replace(end_time=ms) for ms in latencies), failed)
    slow_spans = tuple(span._replace(end_time=ms) for ms in latencies)
    segments = [
        Segment("t1", "s1", "shop", "shop-1", shop_spans, b""),
        Segment("t2", "s2", "slow", "slow-1", slow_spans, b""),
    ]
    by_service = {m.service: m for m in measure(segments, thresholds) if isinstance(m, ServiceMetrics)}
    shop, slow = by_service["shop"], by_service["slow"]
    assert (shop.calls, shop.apdex_satisfied, shop.apdex_tolerating, shop.apdex) == (5, 1, 2, 4000)
    assert (slow.calls, slow.apdex_satisfied, slow.apdex_tolerating, slow.apdex) == (4, 4, 0, 10_000)
    assert shop.combine(shop).apdex_tolerating == 4


def test_a_bad_apdex_threshold_line_is_named() -> None:
    with pytest.raises(ValueError) as bad:
        ApdexThresholds.parse("default: 500\nshop: fast\n", "apdex.yml")
    assert (
        str(bad.value)
        == "apdex.yml, line 2: 'shop: fast' is not 'SERVICE: MS' with a whole number of ms above 0"
    )


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


MINUTE, HOUR, DAY = Downsampling.MINUTE, Downsampling.HOUR, Downsampling.DAY


def l2_worker(dao: MemoryMetricsDAO, instruments: Instruments | None = None) -> MetricsPersistentWorker:
    instruments = instruments or Instruments()
    return MetricsPersistentWorker(
        1,
        "service_metrics_l2",
        ServiceMetrics,
        dao,
        DrainPool("test", 1, instruments),
        instruments,
        BufferSpec(1, 100, BufferStrategy.BLOCKING),
        max_held_bytes=10**9,
    )


def take(worker: MetricsPersistentWorker, items: Sequence[Metrics]) -> None:
    worker.handle_batch(list(items))


def pending(instruments: Instruments, level: Downsampling) -> float:
    return instruments.value("skyoap_metrics_pending", worker="service_metrics_l2", level=level.value)


def stored_calls(dao: MemoryMetricsDAO, level: Downsampling) -> dict[tuple[int, str], tuple[int, int]]:
    """(bucket, service) -> (calls, latency sum) as stored at ``level``."""
    return {
        (v.time_bucket, v.service): (v.calls, v.latency_sum_ms)
        for v in dao.values(ServiceMetrics, level).values()
    }


def expected_calls(sent: list[ServiceMetrics], level: Downsampling) -> dict[tuple[int, str], tuple[int, int]]:
    """What ``stored_calls`` must be once every delta in ``sent`` is added once."""
    sums: dict[tuple[int, str], tuple[int, int]] = {}
    for m in sent:
        k = (level.of_minute(m.time_bucket), m.service)
        calls_, latency = sums.get(k, (0, 0))
        sums[k] = (calls_ + m.calls, latency + m.latency_sum_ms)
    return sums


def delta(bucket: int, service: str, *latencies: int) -> ServiceMetrics:
    return replace(calls(bucket, *latencies), service=service)


@pytest.mark.parametrize("level", list(Downsampling))
@pytest.mark.parametrize("landed", ["all", "part", "none"])
def test_a_write_with_an_unknown_outcome_is_added_once(level: Downsampling, landed: str) -> None:
    """The write of one level stores all, one or none of its two rows and then
    times out; the next rounds find out from the rows' rounds what landed."""
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    worker = l2_worker(dao, instruments)
    sent = [delta(202611211905, "shop", 10), delta(202611211906, "cart", 20, 30)]
    take(worker, sent)
    dao.lands[level] = {"all": 2, "part": 1, "none": 0}[landed]
    worker.persist()
    assert pending(instruments, level) == 2  # both rows of that level wait to be confirmed
    more = [delta(202611211906, "shop", 40), delta(202611211906, "cart", 50)]
    take(worker, more)
    worker.persist()
    worker.persist()
    for lvl in Downsampling:
        assert stored_calls(dao, lvl) == expected_calls(sent + more, lvl), lvl
        assert pending(instruments, lvl) == 0


@pytest.mark.parametrize("level", list(Downsampling))
def test_a_level_that_is_down_gets_each_delta_once_when_it_returns(level: Downsampling) -> None:
    dao = MemoryMetricsDAO()
    worker = l2_worker(dao)
    sent = [delta(202611211905, "shop", 10, 20), delta(202611211906, "shop", 30)]
    take(worker, sent)
    dao.down = {level}
    worker.persist()
    take(worker, [delta(202611211906, "shop", 40)])
    worker.persist()  # still down: the two rounds' deltas wait, merged
    assert stored_calls(dao, level) == {}
    dao.down = set()
    sent += [delta(202611211907, "shop", 50)]
    take(worker, sent[-1:])
    worker.persist()
    sent.insert(2, delta(202611211906, "shop", 40))
    for lvl in Downsampling:
        assert stored_calls(dao, lvl) == expected_calls(sent, lvl), lvl


def test_busy_rows_are_written_once_when_storage_takes_them() -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    worker = l2_worker(dao, instruments)
    sent = [delta(202611211905, "shop", 10), delta(202611211905, "cart", 20)]
    take(worker, sent)
    dao.busy = {delta(2026112119, "shop").key()}  # the shop's hour row, refused as a 429 does
    worker.persist()
    assert stored_calls(dao, HOUR) == {(2026112119, "cart"): (1, 20)}
    dao.busy = set()
    worker.persist()
    for lvl in Downsampling:
        assert stored_calls(dao, lvl) == expected_calls(sent, lvl), lvl
    assert (
        instruments.value("skyoap_worker_dropped_total", worker="service_metrics_l2", reason="refused") == 0
    )


def test_another_writer_between_a_timeout_and_the_next_round_keeps_the_count_exact() -> None:
    """Writer A's minute write lands but times out; writer B (the entity's new
    owner) adds to the same row; A then finds its round kept in the row."""
    dao = MemoryMetricsDAO()
    a, b = l2_worker(dao), l2_worker(dao)
    sent = [delta(202611211905, "shop", 10)]
    take(a, sent)
    dao.lands[MINUTE] = 1
    a.persist()
    sent.append(delta(202611211905, "shop", 20, 30))
    take(b, sent[-1:])
    b.persist()
    a.persist()
    (row,) = dao.rows[(ServiceMetrics.MODEL, MINUTE)].values()
    assert set(row[2]) == {a.writer, b.writer}
    for lvl in Downsampling:
        assert stored_calls(dao, lvl) == expected_calls(sent, lvl), lvl


def test_deltas_are_added_once_through_a_long_run_of_random_faults() -> None:
    """Fifty rounds, each level failing at random in every way storage fails;
    after a quiet round every level holds the exact sums of what was sent."""
    rnd = random.Random(20261122)
    dao = MemoryMetricsDAO()
    worker = l2_worker(dao)
    sent: list[ServiceMetrics] = []
    services = ["shop", "cart", "pay"]
    for _ in range(50):
        batch = [
            delta(
                202611211900 + rnd.randrange(3) * 100 + rnd.randrange(60),
                rnd.choice(services),
                rnd.randrange(1000),
            )
            for _ in range(rnd.randrange(1, 6))
        ]
        sent += batch
        take(worker, batch)
        dao.down = {lvl for lvl in Downsampling if rnd.random() < 0.2}
        dao.lands = {lvl: rnd.randrange(4) for lvl in Downsampling if rnd.random() < 0.3}
        dao.busy = {m.key() for m in batch if rnd.random() < 0.2}
        worker.persist()
    dao.down, dao.lands, dao.busy = set(), {}, set()
    worker.persist()
    for lvl in Downsampling:
        assert stored_calls(dao, lvl) == expected_calls(sent, lvl), lvl
    assert sum(c for c, _ in stored_calls(dao, DAY).values()) == len(sent)


def test_past_its_memory_bound_l2_drops_the_oldest_deltas_and_counts_them() -> None:
    dao = MemoryMetricsDAO()
    instruments = Instruments()
    minute = memory_size([delta(202611211905, "shop", 10)])
    hour = memory_size([delta(2026112119, "shop", 10, 20, 30)])  # a sketch of three latencies
    worker = MetricsPersistentWorker(
        1, "service_metrics_l2", ServiceMetrics, dao, DrainPool("test", 1, instruments), instruments,
        BufferSpec(1, 100, BufferStrategy.BLOCKING), max_held_bytes=2 * minute + 2 * hour,
    )  # fmt: skip
    dao.down = set(Downsampling)
    take(worker, [delta(202611211905, "shop", 10), delta(202611211906, "shop", 20)])
    worker.persist()  # 2 minutes, 1 hour, 1 day held: 4 rows fit
    assert (
        instruments.value("skyoap_worker_dropped_total", worker="service_metrics_l2", reason="memory_full")
        == 0
    )
    take(worker, [delta(202611211907, "shop", 30)])
    worker.persist()  # a third minute: one row too many, the oldest minute goes
    assert (
        instruments.value("skyoap_worker_dropped_total", worker="service_metrics_l2", reason="memory_full")
        == 1
    )
    dao.down = set()
    worker.persist()
    assert stored_calls(dao, MINUTE) == {(202611211906, "shop"): (1, 20), (202611211907, "shop"): (1, 30)}
    assert stored_calls(dao, HOUR) == {(2026112119, "shop"): (3, 60)}


def test_an_instance_relation_keeps_the_servers_key_and_adds_the_clients() -> None:
    def relation(detect_point: str) -> ServiceInstanceRelationMetrics:
        return ServiceInstanceRelationMetrics(
            time_bucket=202611211905, source_service="shop", source_instance="shop-1", dest_service="orders",
            dest_instance="orders-1", detect_point=detect_point,
        )  # fmt: skip

    server, client = relation("server"), relation("client")
    # A row stored before instance relations had sides has no detect point: the server's.
    old = {"time_bucket": 202611211905, "source_service": "shop", "source_instance": "shop-1",
           "dest_service": "orders", "dest_instance": "orders-1", "histogram": server.histogram}  # fmt: skip
    assert ServiceInstanceRelationMetrics.from_row(old) == server
    assert server.entity() == SEP.join(["shop", "shop-1", "orders", "orders-1"])
    assert client.entity() == SEP.join(["shop", "shop-1", "orders", "orders-1", "client"])
    server.check(LIMITS, 1_795_287_900_000)
    client.check(LIMITS, 1_795_287_900_000)
    with pytest.raises(Refused, match="detect point"):
        relation("proxy").check(LIMITS, 1_795_287_900_000)


def test_a_service_relation_unites_the_components_of_its_values_wherever_they_merge() -> None:
    def relation(calls: int, *components: int) -> ServiceRelationMetrics:
        return ServiceRelationMetrics(
            time_bucket=202611211905, source="shop", dest="orders", detect_point="server", calls=calls,
            histogram=sketch.of_latencies([0] * calls), components=components,
        )  # fmt: skip

    flask, spring, tomcat = 7001, 14, 1
    merged = ServiceRelationMetrics.combine_all(
        [relation(1, flask), relation(2, tomcat, spring), relation(3)]
    )
    assert (merged.calls, merged.components) == (6, (tomcat, spring, flask))
    assert relation(1, flask).combine(relation(1, flask)).components == (flask,)
    assert merged.downsampled(Downsampling.HOUR).components == (tomcat, spring, flask)
    assert ServiceRelationMetrics.from_remote(*merged.to_remote()) == merged
    assert ServiceRelationMetrics.from_row(merged.to_row()) == merged
    # A row stored before relations kept components has none.
    assert ServiceRelationMetrics.from_row({**merged.to_row(), "components": None}).components == ()
