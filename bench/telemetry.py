"""Segments per second through one receiver with the whole pipeline into
Elasticsearch, beside two ceilings measured in the same run:

- gRPC: the same stream into a server whose handler only decodes each segment
  (``bench/decode_server.py``);
- storage: the segment documents the pipeline writes, written straight to
  Elasticsearch with the bulk helper and nothing else running.

And where the two cores go: the CPU time the node, Elasticsearch and this
process (the agents' load) each used per segment, beside what Elasticsearch
used per document under the storage ceiling. The pipeline shares the machine
with Elasticsearch and the load; each ceiling has it to itself.

And freshness: the time from a segment's arrival to its metrics being readable
(searchable) in Elasticsearch, while a steady load runs.

And what trace sampling saves: the same pipeline storing 10% of the traces
(``--trace-sampling-settings``; the segments with errors, 5%, are stored
too), its Elasticsearch CPU per segment beside the run that stores all.

    .venv/bin/python -m bench.telemetry [--segments 40000] [--streams 4]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc
from elasticsearch import Elasticsearch, helpers
from elasticsearch.serializer import OrjsonSerializer

from bench.cpu import Usage, measuring
from bench.registration import spawn, stop
from bench.results import Figure, at_least, at_most, record
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.records import SegmentRecord
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.receiver.segments import record_of
from skyoap.receiver.traces import segment_of
from skyoap.runtime.scrape import read_metrics
from skyoap.storage.elasticsearch.client import mapping_of

SERVICES, INSTANCES, ENDPOINTS = 20, 2, 10


MYSQL_CLIENT, REDIS_CLIENT = 33, 30  # SkyWalking's mysql-connector-java and Jedis
DATABASE_TAGS = [
    common_pb2.KeyStringValuePair(key="db.type", value="Mysql"),
    common_pb2.KeyStringValuePair(key="db.instance", value="orders"),
    common_pb2.KeyStringValuePair(key="db.statement", value="SELECT * FROM orders WHERE id = ?"),
]
CACHE_TAGS = [
    common_pb2.KeyStringValuePair(key="cache.type", value="Redis"),
    common_pb2.KeyStringValuePair(key="cache.op", value="read"),
    common_pb2.KeyStringValuePair(key="cache.cmd", value="GET"),
    common_pb2.KeyStringValuePair(key="cache.key", value="order:42"),
]
"""The tags SkyWalking's agents give a query and a cache read."""


def five_span_segment(i: int, start_ms: int, rng: random.Random, service: str | None = None) -> bytes:
    """An entry span called by another service, two exit spans (a database
    query, within its 200 ms, and a cache read, within its 10 ms, with the
    layers and tags agents give them) and two local ones."""
    s = rng.randrange(SERVICES)
    name = service or f"bench-svc-{s}"
    endpoint = f"GET:/api/{rng.randrange(ENDPOINTS)}"
    latency = rng.randrange(1, 300)

    def sp(span_id: int, kind: int, offset: int, ms: int, **fields: object) -> tracing_pb2.SpanObject:
        return tracing_pb2.SpanObject(
            spanId=span_id, parentSpanId=0 if span_id else -1, spanType=kind,  # type: ignore[arg-type]
            startTime=start_ms + offset, endTime=start_ms + offset + ms, **fields,  # type: ignore[arg-type]
        )  # fmt: skip

    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess, traceId=f"t{i}", parentTraceSegmentId=f"p{i}", parentSpanId=1,
        parentService=f"bench-svc-{(s + 1) % SERVICES}", parentServiceInstance="caller-1",
        parentEndpoint="GET:/caller", networkAddressUsedAtPeer=f"{name}:8080",
    )  # fmt: skip
    return tracing_pb2.SegmentObject(
        traceId=f"t{i}",
        traceSegmentId=f"s{i}-{uuid.uuid4().hex[:8]}",
        service=name,
        serviceInstance=f"{name}-{rng.randrange(INSTANCES)}",
        spans=[
            sp(
                0,
                tracing_pb2.Entry,
                0,
                latency,
                operationName=endpoint,
                refs=[ref],
                isError=rng.random() < 0.05,
            ),
            sp(
                1,
                tracing_pb2.Exit,
                1,
                latency // 3,
                operationName="SELECT",
                peer="mysql:3306",
                spanLayer=tracing_pb2.Database,
                componentId=MYSQL_CLIENT,
                tags=DATABASE_TAGS,
            ),
            sp(
                2,
                tracing_pb2.Exit,
                2,
                rng.randrange(4),
                operationName="GET",
                peer="redis:6379",
                spanLayer=tracing_pb2.Cache,
                componentId=REDIS_CLIENT,
                tags=CACHE_TAGS,
            ),
            sp(3, tracing_pb2.Local, 3, 1, operationName="validate"),
            sp(4, tracing_pb2.Local, 4, 1, operationName="render"),
        ],
    ).SerializeToString()


def load(count: int) -> tuple[list[bytes], list[bytes]]:
    """``count`` segments starting within a second of now, and 2,000 more to warm a server up with."""
    rng = random.Random(1)
    now = int(time.time() * 1000)
    segments = [five_span_segment(i, now + i % 1000, rng) for i in range(count)]
    return segments, [five_span_segment(i, now, rng) for i in range(2000)]


def warm(address: str, admin: str, warmup: list[bytes], streams: int) -> None:
    """Sends a node ``warmup`` and waits until it has stored them."""
    send(address, warmup, streams)
    until_written(admin, len(warmup))


def decode_only(
    segments: list[bytes],
    warmup: list[bytes],
    streams: int,
    watching: Callable[[int], contextlib.AbstractContextManager[object]] = lambda _: contextlib.nullcontext(),
) -> Usage:
    """What the decode-only server used to take ``segments`` after
    ``warmup``; ``watching(pid)`` wraps the part measured."""
    decode, address = spawn([sys.executable, "-m", "bench.decode_server"], r"listening on (\S+)")
    usage = Usage()
    try:
        send(address, warmup, streams)
        with watching(decode.pid), measuring(usage, node_pid=decode.pid):
            send(address, segments, streams)
    finally:
        stop(decode)
    return usage


def send(address: str, segments: list[bytes], streams: int, per_call: int = 1000) -> float:
    """Sends ``segments`` over ``streams`` concurrent client streams of
    ``per_call`` segments each; returns the seconds until every call returned."""
    shares = [segments[i::streams] for i in range(streams)]

    def run(share: list[bytes]) -> None:
        with grpc.insecure_channel(address) as channel:
            call = channel.stream_unary(
                "/skywalking.v3.TraceSegmentReportService/collect",
                request_serializer=lambda b: b,
                response_deserializer=common_pb2.Commands.FromString,
            )
            for start in range(0, len(share), per_call):
                call(iter(share[start : start + per_call]), timeout=300)

    threads = [threading.Thread(target=run, args=(s,)) for s in shares]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - began


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def storage_ceiling(es_url: str, segments: list[bytes], es_pid: int, usage: Usage) -> float:
    """Segment documents per second written straight with the bulk helper;
    what it used fills ``usage``."""
    records = [record_of(segment_of(tracing_pb2.SegmentObject.FromString(b))) for b in segments]
    index = f"ceiling{uuid.uuid4().hex[:8]}-{records[0].day}"
    with Elasticsearch(es_url, request_timeout=120, serializer=OrjsonSerializer()) as es:
        es.indices.create(
            index=index,
            mappings=mapping_of(SegmentRecord),
            settings={"number_of_shards": 1, "number_of_replicas": 0},
        )
        actions = ({"_index": index, "_id": r.key(), "_source": r.to_row()} for r in records)
        with measuring(usage, es_pid):
            helpers.bulk(es, actions, chunk_size=2000)
        es.indices.delete(index=index)
    return len(records) / usage.wall_s


def freshness(address: str, es_url: str, prefix: str, probes: int, interval_s: float) -> list[float]:
    """Seconds from sending a segment of a service seen nowhere else to its
    service metric being found by a search, one probe every ``interval_s``."""
    rng = random.Random(3)
    found: list[float] = []
    with Elasticsearch(es_url) as es, grpc.insecure_channel(address) as channel:
        call = channel.stream_unary(
            "/skywalking.v3.TraceSegmentReportService/collect",
            request_serializer=lambda b: b,
            response_deserializer=common_pb2.Commands.FromString,
        )
        for n in range(probes):
            service = f"probe-{uuid.uuid4().hex[:8]}"
            segment = five_span_segment(n, int(time.time() * 1000), rng, service)
            sent = time.perf_counter()
            call(iter([segment]), timeout=30)
            while True:
                hits = es.search(
                    index=f"{prefix}_service_metrics_minute-*", size=1, query={"term": {"service": service}}
                )["hits"]["hits"]
                if hits:
                    found.append(time.perf_counter() - sent)
                    break
                time.sleep(0.02)
            time.sleep(interval_s)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=40_000)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("--persist-interval-s", type=float, default=3.0)
    args = parser.parse_args()

    segments, warmup = load(args.segments)
    decode_usage = decode_only(segments, warmup, args.streams)
    grpc_ceiling = args.segments / decode_usage.wall_s

    es, rs = ElasticsearchServer().start(), RedisServer().start()
    try:
        assert es.proc is not None
        ceiling_usage = Usage()
        storage = storage_ceiling(es.url, segments, es.proc.pid, ceiling_usage)
        usages, fresh, kept = pipeline_runs(es, rs.url, args, segments, warmup)
    finally:
        es.stop()
        rs.stop()

    lower = min(grpc_ceiling, storage)
    on, off, sampled = usages["on"], usages["off"], usages["sampled"]
    pipeline, without = args.segments / on.wall_s, args.segments / off.wall_s
    print(f"gRPC ceiling (decode only):        {grpc_ceiling:8.0f} segments/s")
    print(f"  CPU: {decode_usage.line(args.segments, 'segment')}")
    print(f"storage ceiling (bulk helper):     {storage:8.0f} segments/s (each segment document once)")
    print(f"  CPU: {ceiling_usage.line(args.segments, 'document')}")
    print(
        f"pipeline into Elasticsearch:       {pipeline:8.0f} segments/s = {pipeline / lower:.1%} "
        f"of the lower ceiling ({5 * pipeline:.0f} spans/s, {pipeline / 2:.0f} segments/s per core)"
    )
    print(f"  CPU: {on.line(args.segments, 'segment')}")
    print(
        f"the same, topics not published:    {without:8.0f} segments/s: publishing runs at "
        f"{pipeline / without:.0%} of it"
    )
    print(f"  CPU: {off.line(args.segments, 'segment')}")
    print(
        f"10% of the traces stored ({kept:.1%} of the segments, errors too): "
        f"{args.segments / sampled.wall_s:8.0f} segments/s"
    )
    print(f"  CPU: {sampled.line(args.segments, 'segment')}")
    goal = 0.5 * lower
    others_us = (on.es_s + on.load_s) / args.segments * 1e6
    left_us = (os.cpu_count() or 1) * 1e6 / goal - others_us
    print(
        f"at 50% of the lower ceiling ({goal:.0f} segments/s), Elasticsearch and the load would use "
        f"{goal * others_us / 1e6:.2f} of the {os.cpu_count()} cores at their CPU per segment above, "
        f"leaving the node {left_us:.0f} us per segment (it used {on.node_s / args.segments * 1e6:.0f})"
    )
    print(
        f"freshness (arrival to searchable metrics): p50 {statistics.median(fresh):.2f} s  "
        f"p99 {pct(fresh, 99):.2f} s  (2 persistence periods = {2 * args.persist_interval_s:g} s)"
    )
    lower_is = "the gRPC decode alone" if grpc_ceiling < storage else "Elasticsearch's bulk alone"
    per_segment = 1e6 / args.segments
    record("telemetry", [
        Figure("segments into Elasticsearch, the whole pipeline", pipeline, "segments/s", lower, lower_is,
               at_least(0.5, of_ceiling=True)),
        Figure("the same, topics not published", without, "segments/s", lower, lower_is),
        Figure("the whole pipeline, topics published", pipeline, "segments/s", without,
               "the same, topics not published", at_least(0.9, of_ceiling=True)),
        Figure("the node's CPU per segment", on.node_s * per_segment, "µs", decode_usage.node_s * per_segment,
               "the decode-only server's", at_most(2.0, of_ceiling=True)),
        Figure("Elasticsearch's CPU per segment", on.es_s * per_segment, "µs",
               ceiling_usage.es_s * per_segment, "its CPU per document at the storage ceiling",
               at_most(1.25, of_ceiling=True)),
        Figure("freshness p99, arrival to searchable metrics", pct(fresh, 99), "s",
               goal=at_most(2 * args.persist_interval_s)),
        Figure("Elasticsearch's CPU per segment, 10% of traces stored", sampled.es_s * per_segment, "µs",
               on.es_s * per_segment, "the same with every segment stored", at_most(0.75, of_ceiling=True)),
        Figure("the node's CPU per segment, 10% of traces stored", sampled.node_s * per_segment, "µs",
               on.node_s * per_segment, "the same with every segment stored"),
    ])  # fmt: skip


def pipeline_runs(
    es: ElasticsearchServer,
    redis_url: str,
    args: argparse.Namespace,
    segments: list[bytes],
    warmup: list[bytes],
) -> tuple[dict[str, Usage], list[float], float]:
    """The pipeline's runs: topics not published, published, and published
    storing 10% of the traces; what each used, the freshness of the second
    and the share of segments the third stored."""
    assert es.proc is not None
    usages: dict[str, Usage] = {}
    with tempfile.TemporaryDirectory() as folder:
        sampling = Path(folder) / "trace-sampling-policy-settings.yml"
        sampling.write_text("default:\n  rate: 1000\n  duration: -1\n")
        runs = {
            "off": ["--publish-topics", "off"],
            "on": [],
            "sampled": ["--trace-sampling-settings", str(sampling)],
        }
        for run, options in runs.items():
            node, address, admin, prefix = start_node(es.url, redis_url, args.persist_interval_s, *options)
            try:
                warm(address, admin, warmup, args.streams)
                usages[run] = Usage()
                with measuring(usages[run], es.proc.pid, node.pid):
                    send(address, segments, args.streams)
                    until_written(admin, len(warmup) + args.segments)
                if run == "on":
                    fresh = freshness(address, es.url, prefix, args.probes, 0.25)
                if run == "sampled":
                    kept = stored_share(admin)
            finally:
                stop(node)
    return usages, fresh, kept


def start_node(
    es_url: str,
    redis_url: str,
    persist_interval_s: float,
    *options: str,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], str, str, str]:
    """A node on fresh indices, with ``options`` and ``env`` added: its
    process, gRPC address, admin address and index prefix."""
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    node, addresses = spawn(
        [
            sys.executable, "-m", "skyoap.deploy.cli", "node", "--log-level", "WARNING",
            "--host", "127.0.0.1", "--port", "0", "--admin-port", "0", "--query-port", "-1",
            "--storage", "elasticsearch", "--es-hosts", es_url,
            "--redis-url", redis_url, "--es-index-prefix", prefix, "--redis-key-prefix", prefix,
            "--metrics-persist-interval-s", str(persist_interval_s), *options,
        ],
        r"listening on (\S+ admin \S+)",
        env=None if env is None else {**os.environ, **env},
    )  # fmt: skip
    address, _, admin = addresses.split()
    return node, address, admin, prefix


SAMPLED = "skyoap_trace_sampling_segments_total"


def until_written(admin: str, total: int, timeout_s: float = 900) -> None:
    """Waits until the node has taken ``total`` segments and stored the
    records of those it keeps (all of them, unless it samples)."""
    deadline = time.monotonic() + timeout_s
    while True:
        read = read_metrics(admin, names=["skyoap_worker_stored_total", SAMPLED])
        kept, dropped = (read.total(SAMPLED, outcome=outcome) for outcome in ("kept", "dropped"))
        to_store = kept if kept + dropped else total
        if (
            kept + dropped in (0, total)
            and read.value("skyoap_worker_stored_total", worker="segment_records", op="write") >= to_store > 0
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node did not store {total} segments in {timeout_s} s")
        time.sleep(0.05)


def stored_share(admin: str) -> float:
    """The share of the segments a sampling node kept."""
    read = read_metrics(admin, names=[SAMPLED])
    kept, dropped = (read.total(SAMPLED, outcome=outcome) for outcome in ("kept", "dropped"))
    return kept / (kept + dropped)


if __name__ == "__main__":
    main()
