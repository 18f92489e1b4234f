"""A reading of self-metrics: totals over labels, a histogram's quantile as
the upper bound of the bucket that holds it, and a node of worker processes."""

from __future__ import annotations

from skyoap.runtime.instruments import Instruments
from skyoap.runtime.scrape import Scrape, exposition
from skyoap.wiring.overview import figures

TEXT = """
# TYPE skyoap_worker_persist_seconds histogram
skyoap_worker_persist_seconds_bucket{worker="a",le="0.005"} 50.0
skyoap_worker_persist_seconds_bucket{worker="a",le="0.01"} 90.0
skyoap_worker_persist_seconds_bucket{worker="a",le="+Inf"} 100.0
skyoap_worker_persist_seconds_count{worker="a"} 100.0
skyoap_worker_persist_seconds_sum{worker="a"} 0.6
skyoap_worker_persist_seconds_bucket{worker="b",le="0.005"} 0.0
skyoap_worker_persist_seconds_bucket{worker="b",le="0.01"} 0.0
skyoap_worker_persist_seconds_bucket{worker="b",le="+Inf"} 100.0
skyoap_worker_persist_seconds_count{worker="b"} 100.0
skyoap_worker_persist_seconds_sum{worker="b"} 3.4
# TYPE skyoap_buffer_depth gauge
skyoap_buffer_depth{queue="q1"} 3.0
skyoap_buffer_depth{queue="q2"} 4.0
# TYPE skyoap_buffer_dropped_total counter
skyoap_buffer_dropped_total{queue="q1"} 2.0
# TYPE skyoap_worker_dropped_total counter
skyoap_worker_dropped_total{worker="a",reason="refused"} 5.0
"""


def test_a_quantile_is_the_upper_bound_of_the_bucket_that_holds_it() -> None:
    scrape = Scrape(TEXT)
    # 200 rounds: 50 under 5 ms, 40 more under 10 ms, 110 slower.
    assert scrape.quantile("skyoap_worker_persist_seconds", 0.25) == 0.005
    assert scrape.quantile("skyoap_worker_persist_seconds", 0.45) == 0.01
    assert scrape.quantile("skyoap_worker_persist_seconds", 0.99) == float("inf")
    assert scrape.quantile("skyoap_nothing_seconds", 0.99) is None


def test_the_cluster_page_s_figures_of_a_node() -> None:
    shown = figures(Scrape(TEXT))
    assert shown["queued"] == 7
    assert shown["dropped"] == 7
    assert shown["persistMeanMs"] == 20.0  # 4 s over 200 rounds
    assert shown["persistP99Ms"] is None  # past the last bound: no bound to show
    every_one_within_10_ms = TEXT.replace('le="0.01"} 90.0', 'le="0.01"} 100.0').replace(
        'le="0.01"} 0.0', 'le="0.01"} 100.0'
    )
    shown = figures(Scrape(every_one_within_10_ms))
    assert shown["persistP99Ms"] == 10.0


def test_a_node_of_worker_processes_reads_as_one_and_each_process_apart() -> None:
    """The parent's /metrics: its own series beside each worker's, labelled
    with its process; a total without a process is the node's."""
    parent, worker = Instruments(), Instruments()
    parent.counter("skyoap_admin_dropped_total", "drops", ["reason"]).labels("timeout").inc()
    worker.counter("skyoap_admin_dropped_total", "drops", ["reason"]).labels("timeout").inc(2)
    stored = worker.counter("skyoap_worker_stored_total", "rows", ["worker", "op"])
    stored.labels("segment_records", "write").inc(5)
    one = worker.exposition().decode()
    stored.labels("segment_records", "write").inc(2)
    node = Scrape(exposition(parent.registry, {"0": one, "1": worker.exposition().decode()}).decode())
    assert node.value("skyoap_worker_stored_total", worker="segment_records", op="write") == 12
    assert node.value("skyoap_worker_stored_total", worker="segment_records", op="write", process="1") == 7
    assert node.total("skyoap_worker_stored_total", process="0") == 5
    assert node.value("skyoap_admin_dropped_total", reason="timeout") == 5  # the parent's 1 and 2 of each
    assert node.value("skyoap_admin_dropped_total", reason="timeout", process="0") == 2
