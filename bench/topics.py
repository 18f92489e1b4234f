"""Reading a topic in Elasticsearch: records per second by one consumer
(``consumer/client.py``) and by Spark (local, two cores, the ``skyoap`` data
source), beside the raw rate of reading the same documents with the
Elasticsearch client (search_after by offset, nothing else) in the same run.

And delivery latency: while a writer appends batches the way L2 does, the time
from an append returning (the watermark has moved) to a subscribed consumer
receiving each record, p50 and p99; and from the append's start, for scale.

    .venv/bin/python -m bench.topics [--records 200000] [--partitions 4]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

from elasticsearch import Elasticsearch

from analytics.source import options_of
from consumer.client import Consumer
from deploy.servers import ElasticsearchServer, RedisServer
from model.topics import Entry
from storage.api import TopicDAO
from storage.config import StorageConfig, StorageKind
from storage.select import open_storage

TOPIC = "segment"


def value(i: int) -> dict[str, object]:
    """About the size of a stored segment row without its protobuf."""
    return {"key": f"seg-{i}", "trace_id": f"trace-{i // 3}", "service": f"svc-{i % 20}",
            "instance": f"svc-{i % 20}-1", "endpoint": f"GET:/api/{i % 10}", "start_ms": 1795290000000 + i,
            "latency_ms": i % 300, "is_error": i % 50 == 0, "time_bucket": 202611211200}  # fmt: skip


def raw_rate(es_url: str, index: str, partitions: int) -> tuple[int, float]:
    es = Elasticsearch(es_url, request_timeout=60)
    n, start = 0, time.perf_counter()
    for p in range(partitions):
        after: list[int] | None = None
        while True:
            res = es.search(
                index=index, query={"term": {"partition": p}}, sort=[{"offset": "asc"}], size=1000,
                search_after=after,
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


def spark_rate(config: StorageConfig, records: int) -> tuple[float, float]:
    from analytics.spark import session

    t0 = time.perf_counter()
    spark = session()
    started = time.perf_counter() - t0
    start = time.perf_counter()
    n = spark.read.format("skyoap").options(**options_of(config)).option("topic", TOPIC).load().count()
    elapsed = time.perf_counter() - start
    spark.stop()
    assert n == records, (n, records)
    return elapsed, started


def latency(
    config: StorageConfig, streams: TopicDAO, partitions: int, batches: int
) -> tuple[list[float], list[float]]:
    consumer = Consumer.open(config, f"lat-{uuid.uuid4().hex[:6]}", auto_offset_reset="latest",
                             enable_auto_commit=False, fetch_idle_s=0.02)  # fmt: skip
    consumer.subscribe([TOPIC])
    while len(consumer.assignment()) < partitions:
        consumer.poll(0.1)
    appended: dict[tuple[int, int], tuple[float, float]] = {}
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
        p = b % partitions
        began = time.perf_counter()
        bounds = streams.append(TOPIC, p, [Entry(f"k{b}-{i}", value(i), 1) for i in range(100)])
        done = time.perf_counter()
        for o in range(bounds.end - 100, bounds.end):
            appended[(p, o)] = (began, done)
        time.sleep(0.05)
    deadline = time.monotonic() + 30
    while len(received.keys() & appended.keys()) < len(appended) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join()
    consumer.close()
    after_watermark = sorted(received[k] - appended[k][1] for k in appended if k in received)
    after_start = sorted(received[k] - appended[k][0] for k in appended if k in received)
    assert len(after_watermark) == len(appended), "some records never arrived"
    return after_watermark, after_start


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


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
        storage.topics.install({TOPIC: args.partitions})
        start = time.perf_counter()
        for first in range(0, args.records, 1000):
            chunk = [Entry(f"k{i}", value(i), 1) for i in range(first, min(first + 1000, args.records))]
            storage.topics.append(TOPIC, (first // 1000) % args.partitions, chunk)
        append_s = time.perf_counter() - start
        print(
            f"appended {args.records} records in {append_s:.1f} s ({args.records / append_s:,.0f} records/s)"
        )

        n, raw_s = raw_rate(es.url, f"{prefix}_topic_{TOPIC}", args.partitions)
        assert n == args.records, (n, args.records)
        consumer_s = consumer_rate(config, args.records)
        spark_s, spark_start_s = spark_rate(config, args.records)
        raw = args.records / raw_s
        print(f"raw Elasticsearch read (ceiling): {raw:,.0f} records/s")
        print(f"one consumer:                     {args.records / consumer_s:,.0f} records/s "
              f"({args.records / consumer_s / raw:.0%} of the ceiling)")  # fmt: skip
        share = args.records / spark_s / raw
        print(f"Spark local[2] batch read:        {args.records / spark_s:,.0f} records/s "
              f"({share:.0%} of the ceiling; its {spark_start_s:.1f} s start not counted)")  # fmt: skip

        after_watermark, after_start = latency(config, storage.topics, args.partitions, args.latency_batches)
        print(f"delivery after the watermark moved: p50 {pct(after_watermark, 50) * 1000:.0f} ms, "
              f"p99 {pct(after_watermark, 99) * 1000:.0f} ms ({len(after_watermark)} records)")  # fmt: skip
        print(f"delivery from the append's start:   p50 {pct(after_start, 50) * 1000:.0f} ms, "
              f"p99 {pct(after_start, 99) * 1000:.0f} ms")  # fmt: skip
        storage.close()
    finally:
        es.stop()
        rs.stop()


if __name__ == "__main__":
    main()
