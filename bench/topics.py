"""Reading the segment topic in Elasticsearch: records per second by one
consumer (``consumer/client.py``) and by Spark (local, two cores, the
``skyoap`` data source), beside the raw rate of reading the same documents
with the Elasticsearch client (search_after by offset, nothing else) in the
same run. And a read of one service with its filter pushed to the storage, with
the count of entries the source fetched.

And delivery latency: while a writer stores segments the way a record worker
does, the time from a round of the record topics returning (the watermark has
moved) to a subscribed consumer receiving each record, p50 and p99; and from
the write's start, for scale.

    .venv/bin/python -m bench.topics [--records 200000] [--partitions 4]
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid

from elasticsearch import Elasticsearch
from pyspark.sql.datasource import EqualTo

from bench.results import Figure, at_least, at_most, pct, record
from skyoap.aggregator.topics import Topics
from skyoap.analytics.source import FilteringTopicReader, options_of
from skyoap.consumer.client import Consumer
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.metrics import minute_bucket
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Text
from skyoap.model.topics import Table, Topic
from skyoap.runtime.instruments import Instruments
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import OpenStorage, open_storage

TOPIC = "segment"
SERVICE = "svc-3"
"""The service of a filtered read: one segment in twenty."""
SEGMENTS = Table(SegmentRecord)
DATA = Text("Cg" * 300)
"""About the size of a five-span segment as an agent sends it (base64)."""


def segments(first: int, count: int, prefix: str = "seg") -> list[SegmentRecord]:
    now = int(time.time() * 1000)
    return [
        SegmentRecord(
            time_bucket=minute_bucket(now),
            segment_id=f"{prefix}-{i}",
            trace_id=f"trace-{i // 3}",
            service=f"svc-{i % 20}",
            instance=f"svc-{i % 20}-1",
            endpoint=f"GET:/api/{i % 10}",
            start_time=now + i,
            end_time=now + i + i % 300,
            latency_ms=i % 300,
            is_error=i % 50 == 0,
            spans=5,
            data=DATA,
        )
        for i in range(first, first + count)
    ]


def record_topics(storage: OpenStorage, partitions: int) -> Topics:
    return Topics(storage.topics, storage.records, storage.offsets, dict.fromkeys(Topic, partitions),
                        Instruments(), interval_s=3600)  # fmt: skip


def write(topics: Topics, storage: OpenStorage, items: list[SegmentRecord]) -> list[tuple[int, int]]:
    """Stores ``items`` as a record worker does; their (partition, offset)."""
    placement = topics.place(SEGMENTS, items, 0)
    storage.records.insert(SegmentRecord, items, placement.positions)
    topics.written(placement)
    assert placement.positions is not None
    return [(p.partition, p.offset) for p in placement.positions]


def raw_rate(es_url: str, index: str, partitions: int) -> tuple[int, float]:
    es = Elasticsearch(es_url, request_timeout=60)
    n, start = 0, time.perf_counter()
    for p in range(partitions):
        after: list[int] | None = None
        while True:
            res = es.search(
                index=index, query={"term": {"topic_partition": p}}, sort=[{"topic_offset": "asc"}],
                size=1000, search_after=after,
            )["hits"]["hits"]  # fmt: skip
            if not res:
                break
            n += len(res)
            after = res[-1]["sort"]
    elapsed = time.perf_counter() - start
    es.close()
    return n, elapsed


def consumer_rate(config: StorageConfig, records: int) -> float:
    consumer = Consumer.open(config, f"bench-{uuid.uuid4().hex[:6]}", enable_auto_commit=False)
    consumer.subscribe([TOPIC])
    got, start = 0, time.perf_counter()
    while got < records:
        got += len(consumer.poll(1.0, max_records=5000))
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def spark_rate(config: StorageConfig, records: int) -> tuple[float, float, float, float, int]:
    """Seconds Spark takes to start, to count the topic the first time (its
    Python workers starting) and again, and to count one service's entries
    with the filter pushed to the storage; how many that is."""
    from skyoap.analytics.spark import session

    t0 = time.perf_counter()
    spark = session()
    started = time.perf_counter() - t0
    options = {**options_of(config), "topic": TOPIC}
    counts = []
    for _ in range(2):
        start = time.perf_counter()
        n = spark.read.format("skyoap").options(**options).load().count()
        counts.append(time.perf_counter() - start)
        assert n == records, (n, records)
    start = time.perf_counter()
    pushing = spark.read.format("skyoap").options(**options).option("pushFilters", "true").load()
    one = pushing.where(f"service = '{SERVICE}'").count()
    filtered = time.perf_counter() - start
    spark.stop()
    return started, counts[0], counts[1], filtered, one


def fetched_by_filter(config: StorageConfig) -> int:
    """The entries the source fetches from the storage for a read of one
    service (its reader run here, as a Spark task runs it)."""
    reader = FilteringTopicReader(options_of(config), Topic.SEGMENT)
    assert list(reader.pushFilters([EqualTo(("service",), SERVICE)])) == []
    return sum(b.num_rows for p in reader.partitions() for b in reader.read(p))


def latency(
    config: StorageConfig, storage: OpenStorage, partitions: int, batches: int
) -> tuple[list[float], list[float]]:
    consumer = Consumer.open(config, f"lat-{uuid.uuid4().hex[:6]}", auto_offset_reset="latest",
                             enable_auto_commit=False, fetch_idle_s=0.02)  # fmt: skip
    consumer.subscribe([TOPIC])
    while len(consumer.assignment()) < partitions:
        consumer.poll(0.1)
    topics = record_topics(storage, partitions)
    written: dict[tuple[int, int], tuple[float, float]] = {}
    received: dict[tuple[int, int], float] = {}
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for r in consumer.poll(0.2, max_records=10_000):
                received[(r.partition, r.offset)] = time.perf_counter()

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(1.0)
    for b in range(batches):
        began = time.perf_counter()
        placed = write(topics, storage, segments(b * 100, 100, "lat"))
        topics.run_once()  # readable, and the end moved
        done = time.perf_counter()
        for position in placed:
            written[position] = (began, done)
        time.sleep(0.05)
    deadline = time.monotonic() + 30
    while len(received.keys() & written.keys()) < len(written) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join()
    consumer.close()
    after_watermark = sorted(received[k] - written[k][1] for k in written if k in received)
    after_start = sorted(received[k] - written[k][0] for k in written if k in received)
    assert len(after_watermark) == len(written), "some records never arrived"
    return after_watermark, after_start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--latency-batches", type=int, default=200)
    args = parser.parse_args()
    es, rs = ElasticsearchServer(heap_mb=1024).start(), RedisServer().start()
    try:
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        config = StorageConfig(kind=StorageKind.ELASTICSEARCH, es_hosts=es.url, es_index_prefix=prefix,
                               redis_url=rs.url, redis_key_prefix=prefix)  # fmt: skip
        storage = open_storage(config)
        storage.records.install([SegmentRecord])
        storage.topics.install({t.value: args.partitions for t in Topic})
        topics = record_topics(storage, args.partitions)
        start = time.perf_counter()
        for first in range(0, args.records, 1000):
            write(topics, storage, segments(first, min(1000, args.records - first)))
        topics.run_once()
        write_s = time.perf_counter() - start
        print(f"stored {args.records} segments in {write_s:.1f} s ({args.records / write_s:,.0f} records/s)")

        # Twice, the second timed: the first warms Elasticsearch's caches, as
        # the first read warms them for the readers after it.
        raw_rate(es.url, f"{prefix}_{TOPIC}-*", args.partitions)
        n, raw_s = raw_rate(es.url, f"{prefix}_{TOPIC}-*", args.partitions)
        assert n == args.records, (n, args.records)
        consumer_s = consumer_rate(config, args.records)
        spark_start_s, first_s, spark_s, filtered_s, one = spark_rate(config, args.records)
        fetched = fetched_by_filter(config)
        raw = args.records / raw_s
        print(f"raw Elasticsearch read (ceiling): {raw:,.0f} records/s")
        print(f"one consumer:                     {args.records / consumer_s:,.0f} records/s "
              f"({args.records / consumer_s / raw:.0%} of the ceiling)")  # fmt: skip
        print(f"Spark local[2] batch read:        {args.records / spark_s:,.0f} records/s "
              f"({args.records / spark_s / raw:.0%} of the ceiling); the first read after the "
              f"session's {spark_start_s:.1f} s start: {args.records / first_s:,.0f} records/s "
              f"({args.records / first_s / raw:.0%})")  # fmt: skip
        print(f"Spark, service = '{SERVICE}' pushed: {one:,} entries in {filtered_s:.2f} s; "
              f"the source fetched {fetched:,} of the {args.records:,} stored")  # fmt: skip

        after_watermark, after_start = latency(config, storage, args.partitions, args.latency_batches)
        print(f"delivery after the watermark moved: p50 {pct(after_watermark, 50) * 1000:.0f} ms, "
              f"p99 {pct(after_watermark, 99) * 1000:.0f} ms ({len(after_watermark)} records)")  # fmt: skip
        print(f"delivery from the append's start:   p50 {pct(after_start, 50) * 1000:.0f} ms, "
              f"p99 {pct(after_start, 99) * 1000:.0f} ms")  # fmt: skip
        read = "raw Elasticsearch read"
        record("topics", [
            Figure("one consumer", args.records / consumer_s, "records/s", raw, read,
                   at_least(0.9, of_ceiling=True)),
            Figure("Spark local[2] batch read", args.records / spark_s, "records/s", raw, read,
                   at_least(0.6, of_ceiling=True)),
            Figure("delivery p99 after the watermark moved", pct(after_watermark, 99) * 1000, "ms",
                   goal=at_most(1000)),
        ])  # fmt: skip
        storage.close()
    finally:
        es.stop()
        rs.stop()


if __name__ == "__main__":
    main()
