from __future__ import annotations

import pytest

from skyoap.edge.admin import AdminServer
from skyoap.runtime.buffer import BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.scrape import Scrape, read_metrics


def test_the_exposition_carries_labelled_series_that_prometheus_parses() -> None:
    instruments = Instruments()
    queue: BufferQueue[int] = BufferQueue("segment_records", 1, 3, BufferStrategy.IF_POSSIBLE, instruments)
    for i in range(5):
        queue.produce(i)
    latency = instruments.histogram("skyoap_storage_write_seconds", "one bulk write", ["worker"])
    latency.labels(worker="segment_records").observe(0.02)
    latency.labels(worker="segment_records").observe(3.0)

    scrape = Scrape(instruments.exposition().decode())
    assert scrape.value("skyoap_buffer_depth", queue="segment_records") == 3
    assert scrape.value("skyoap_buffer_capacity", queue="segment_records") == 3
    assert scrape.value("skyoap_buffer_dropped_total", queue="segment_records") == 2
    assert scrape.value("skyoap_storage_write_seconds_count", worker="segment_records") == 2
    assert scrape.value("skyoap_storage_write_seconds_bucket", worker="segment_records", le="0.025") == 1
    assert scrape.value("skyoap_storage_write_seconds_bucket", worker="segment_records", le="5.0") == 2
    assert scrape.value("skyoap_storage_write_seconds_sum", worker="segment_records") == pytest.approx(3.02)
    assert "_created" not in instruments.exposition().decode()


def test_components_that_share_a_series_share_its_family() -> None:
    instruments = Instruments()
    a = instruments.counter("skyoap_pool_errors_total", "batches", ["pool"])
    assert instruments.counter("skyoap_pool_errors_total", "batches", ["pool"]) is a
    a.labels(pool="L1").inc(2)
    assert instruments.value("skyoap_pool_errors_total", pool="L1") == 2
    assert instruments.value("skyoap_pool_errors_total", pool="L2") == 0
    with pytest.raises(KeyError, match="no series skyoap_nothing_total"):
        instruments.value("skyoap_nothing_total")


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda i: i.counter("buffer_dropped_total", "x"), "every series of a node is named skyoap_"),
        (lambda i: i.counter("skyoap_dropped", "x"), "a counter's name ends with _total"),
        (lambda i: i.histogram("skyoap_write", "x"), "a latency's name ends with _seconds"),
        (lambda i: i.gauge("skyoap_pool_errors_total", "x", ["queue"]), "declared twice, differently"),
    ],
)
def test_series_are_named_by_the_conventions(declare, message) -> None:  # type: ignore[no-untyped-def]
    instruments = Instruments()
    instruments.counter("skyoap_pool_errors_total", "batches", ["pool"])
    with pytest.raises(ValueError, match=message):
        declare(instruments)


def test_a_scrape_that_names_families_gets_those_alone() -> None:
    instruments = Instruments()
    stored = instruments.counter("skyoap_worker_stored_total", "rows written", ["worker"])
    stored.labels(worker="segment_records").inc(7)
    instruments.gauge("skyoap_buffer_depth", "items queued", ["queue"]).labels(queue="segment_records").set(3)
    admin = AdminServer("127.0.0.1", 0, instruments)
    admin.start()
    try:
        address = f"127.0.0.1:{admin.port}"
        some = read_metrics(address, names=["skyoap_worker_stored_total"])
        every = read_metrics(address)
    finally:
        admin.close()

    assert some.value("skyoap_worker_stored_total", worker="segment_records") == 7
    assert some.value("skyoap_buffer_depth", queue="segment_records") == 0
    assert every.value("skyoap_worker_stored_total", worker="segment_records") == 7
    assert every.value("skyoap_buffer_depth", queue="segment_records") == 3
