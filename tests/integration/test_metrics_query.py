"""A query of metrics rows on each storage: more rows than one Elasticsearch
search answers (10,000) are read in turns, each row once, newest first."""

from __future__ import annotations

from skyoap.model.metrics import METRICS_TYPES, Downsampling, ServiceMetrics
from skyoap.storage.api import MetricsWrite
from skyoap.storage.select import OpenStorage
from tests.integration.helpers import eventually

FIRST, LAST = 202611241000, 202611241001
SERVICES = 5_030


def test_a_query_reads_as_many_rows_as_asked_past_one_search(storage: OpenStorage) -> None:
    storage.metrics.install(METRICS_TYPES)
    rows = [
        ServiceMetrics(time_bucket=b, service=f"svc-{s}", calls=s)
        for b in (FIRST, LAST)
        for s in range(SERVICES)
    ]
    storage.metrics.put(ServiceMetrics, Downsampling.MINUTE, [MetricsWrite(None, r, {}) for r in rows])

    def query(limit: int) -> list[ServiceMetrics]:
        return storage.metrics.query(ServiceMetrics, Downsampling.MINUTE, FIRST, LAST, None, limit)

    eventually(lambda: len(query(20_000)) == 2 * SERVICES)  # Elasticsearch: once refreshed
    every = query(20_000)
    assert sorted((r.time_bucket, r.service, r.calls) for r in every) == sorted(
        (r.time_bucket, r.service, r.calls) for r in rows
    )
    assert [r.time_bucket for r in every] == [LAST] * SERVICES + [FIRST] * SERVICES
    assert len(query(10_007)) == 10_007
    assert len({r.service for r in query(10_007) if r.time_bucket == FIRST}) == 10_007 - SERVICES
    assert storage.metrics.query(ServiceMetrics, Downsampling.MINUTE, FIRST, FIRST, {"service": "svc-7"}) == [
        rows[7]
    ]
