"""Storage per metric row: what keeping latencies as a sketch (percentiles
within 1%) costs beside the fixed 29 buckets earlier releases stored, in
the same run, on the embedded storage and on Elasticsearch.

Each figure is the bytes a stored endpoint row takes at a load of calls
per minute, with latencies drawn from a lognormal distribution (median
40 ms, sigma 1: most calls fast, a long tail), as a minute row and as the
hour row sixty such minutes roll into. The ceiling is the same rows with
the earlier fixed-bucket histogram. SQLite's figure is the file's size
after VACUUM over the rows; Elasticsearch's is the index's store after a
force merge to one segment, over its documents.

    .venv/bin/python -m bench.metric_rows [--rows 300]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.results import Figure, record
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model import sketch
from skyoap.model.metrics import Downsampling, EndpointMetrics, rank_at
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.elasticsearch.client import ElasticsearchClient
from skyoap.storage.elasticsearch.metrics import index_name
from skyoap.storage.select import OpenStorage, open_storage

LOADS = (10, 100, 1_000, 10_000)
"""Calls per minute of each endpoint."""
MINUTE = 202612071200


@dataclass(frozen=True, slots=True, kw_only=True)
class _Earlier(EndpointMetrics):
    """An endpoint row as earlier releases stored it: a count for each of
    29 fixed buckets, a percentile the lower bound of the bucket it is in."""

    def percentile(self, p: int) -> int:
        return sketch.value_at(sketch.of_stored(self.histogram), rank_at(p, self.calls))


def _fixed(latencies: np.ndarray) -> tuple[int, ...]:
    bounds = np.asarray(sketch.EARLIER_BOUNDS_MS)
    slots = np.maximum(np.searchsorted(bounds, latencies, side="right") - 1, 0)
    return tuple(int(n) for n in np.bincount(slots, minlength=len(bounds)))


def rows(count: int, calls: int, minutes: int, earlier: bool, seed: int) -> Iterator[EndpointMetrics]:
    """``count`` endpoints' rows of ``minutes`` minutes merged, of ``calls``
    a minute each; the histogram as a sketch or (``earlier``) fixed buckets."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        latencies = np.round(rng.lognormal(np.log(40), 1.0, calls * minutes)).astype(np.int64)
        histogram = _fixed(latencies) if earlier else sketch.of_latencies(latencies.tolist())
        yield (_Earlier if earlier else EndpointMetrics)(
            time_bucket=MINUTE if minutes == 1 else MINUTE // 100,
            service=f"service-{i % 10}",
            endpoint=f"GET:/api/items/{i}",
            calls=calls * minutes,
            errors=calls * minutes // 50,
            latency_sum_ms=int(latencies.sum()),
            histogram=histogram,
        )


def measure(
    kind: str,
    storage: Callable[[str], OpenStorage],
    size: Callable[[str, Downsampling], int],
    args: argparse.Namespace,
) -> list[Figure]:
    figures = []
    for minutes, level in ((1, Downsampling.MINUTE), (60, Downsampling.HOUR)):
        for calls in LOADS if minutes == 1 else (100, 1_000):
            bytes_per_row = []
            for earlier in (False, True):
                name = f"{calls}-{minutes}-{int(earlier)}"
                opened = storage(name)
                try:
                    opened.metrics.install([EndpointMetrics])
                    found = list(rows(args.rows, calls, minutes, earlier, seed=calls))
                    outcome = opened.metrics.put(
                        EndpointMetrics, level, [MetricsWrite(None, r, {}) for r in found]
                    )
                    assert not outcome.failed, outcome
                finally:
                    opened.close()
                bytes_per_row.append(size(name, level) / len(found))
            row = "minute" if minutes == 1 else "hour"
            figure = Figure(
                f"{kind}: an endpoint's {row} row at {calls:,} calls a minute", bytes_per_row[0], "bytes",
                ceiling=bytes_per_row[1], ceiling_is="the same row with 29 fixed buckets",
            )  # fmt: skip
            figures.append(figure)
            print(
                f"{figure.name}: {figure.value:,.0f} B (fixed buckets: {figure.ceiling:,.0f} B)", flush=True
            )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:

        def embedded(name: str) -> OpenStorage:
            return open_storage(StorageConfig(kind=StorageKind.EMBEDDED, embedded_path=f"{tmp}/{name}.db"))

        def file_size(name: str, level: Downsampling) -> int:
            path = Path(tmp) / f"{name}.db"
            db = sqlite3.connect(path)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("VACUUM")
            db.close()
            return path.stat().st_size

        figures += measure("embedded", embedded, file_size, args)
    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        client = ElasticsearchClient(es.url, "")

        def elastic(name: str) -> OpenStorage:
            config = StorageConfig(kind=StorageKind.ELASTICSEARCH, es_hosts=es.url, redis_url=rs.url,
                                   es_index_prefix=f"b{name}")  # fmt: skip
            return open_storage(config)

        def store_size(name: str, level: Downsampling) -> int:
            index = f"b{name}_{index_name(EndpointMetrics, level)}*"
            client.es.indices.refresh(index=index)
            client.es.indices.forcemerge(index=index, max_num_segments=1)
            stats = client.es.indices.stats(index=index, metric="store")
            client.es.indices.delete(index=index)
            return int(stats["_all"]["primaries"]["store"]["size_in_bytes"])

        figures += measure("Elasticsearch", elastic, store_size, args)
    finally:
        es.stop()
        rs.stop()
    record("metric_rows", figures)


if __name__ == "__main__":
    main()
