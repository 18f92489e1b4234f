"""What the fault tests share: an agent load that keeps a ledger of what the
node accepted and refused, the exact metrics that ledger implies, what
storage holds, and the line each test prints for ``docs/reliability.md``."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import grpc
from elasticsearch import Elasticsearch, helpers

from skyoap.deploy.cluster import NodeProcess
from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import Downsampling, EndpointMetrics, ServiceMetrics
from skyoap.model.topics import Table, TopicRecord
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.runtime.scrape import read_metrics
from skyoap.storage.api import StorageError
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.select import open_storage, topics_of

SERVICES = ("shop", "cart", "pay")
FIGURES = Path(__file__).resolve().parent / "figures.jsonl"
"""Each run appends its figures here (not committed): the source of the table."""

Sums = dict[tuple[str, int, str], tuple[int, int]]
"""(model, bucket, entity) -> (calls, latency sum)."""


class Taken(NamedTuple):
    """A segment a node took (answered OK)."""

    service: str
    endpoint: str
    start_ms: int
    latency_ms: int
    node: str
    """The address of the node that took it."""
    at: float
    """When the answer came (time.time())."""


@dataclass
class Ledger:
    """What the agents sent and what became of it, segment by segment."""

    sent: int = 0
    accepted: list[Taken] = field(default_factory=list)
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    """Segments of calls answered with each status other than OK."""
    slowest_answer_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def taken_between(self, since: float, until: float, node: str | None = None) -> int:
        """Segments answered OK from ``since`` to ``until`` (by ``node`` if given)."""
        return sum(1 for t in self.accepted if since <= t.at <= until and node in (None, t.node))

    def expected(self, level: Downsampling) -> Sums:
        sums: dict[tuple[str, int, str], list[int]] = {}
        for service, endpoint, start, latency, *_ in self.accepted:
            bucket = level.bucket_of(start)
            for key in (("service", bucket, service), ("endpoint", bucket, f"{service}/{endpoint}")):
                acc = sums.setdefault(key, [0, 0])
                acc[0] += 1
                acc[1] += latency
        return {k: (c, lat) for k, (c, lat) in sums.items()}


def segment(
    n: int, now_ms: int, payload_bytes: int = 0
) -> tuple[tracing_pb2.SegmentObject, tuple[str, str, int, int]]:
    """Segment ``n``: one entry span, with a tag of ``payload_bytes`` bytes."""
    service, endpoint, latency = SERVICES[n % 3], f"/op{n % 5}", n % 97 + 1
    start = now_ms - 200
    tags = [common_pb2.KeyStringValuePair(key="payload", value="p" * payload_bytes)] if payload_bytes else []
    pb = tracing_pb2.SegmentObject(
        traceId=f"t-{n}", traceSegmentId=f"s-{n}", service=service, serviceInstance=f"{service}-1",
        spans=[tracing_pb2.SpanObject(
            spanId=0, parentSpanId=-1, spanType=tracing_pb2.Entry, startTime=start, endTime=start + latency,
            operationName=endpoint, tags=tags,
        )],
    )  # fmt: skip
    return pb, (service, endpoint, start, latency)


class AgentLoad:
    """``threads`` agents, each sending ``calls_per_s`` calls of
    ``segments_per_call`` segments until stopped, to each of ``addresses`` in
    turn. A call is either taken whole or refused whole (the node promises
    it), so the ledger books it whole either way."""

    def __init__(
        self,
        addresses: str | Sequence[str],
        calls_per_s: float,
        segments_per_call: int,
        threads: int = 1,
        client_timeout_s: float = 30.0,
        payload_bytes: int = 0,
    ) -> None:
        self.ledger = Ledger()
        self._addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        self._pause_s = 1.0 / calls_per_s
        self._per_call = segments_per_call
        self._timeout_s = client_timeout_s
        self._payload_bytes = payload_bytes
        self._stop = threading.Event()
        self._next = iter(range(10**9))
        self._next_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def __enter__(self) -> AgentLoad:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(self._timeout_s + 10)

    def _numbers(self) -> list[int]:
        with self._next_lock:
            return [next(self._next) for _ in range(self._per_call)]

    def _run(self, thread: int) -> None:
        channels = [grpc.insecure_channel(a) for a in self._addresses]
        calls = [
            c.stream_unary(
                "/skywalking.v3.TraceSegmentReportService/collect",
                request_serializer=tracing_pb2.SegmentObject.SerializeToString,
                response_deserializer=common_pb2.Commands.FromString,
            )
            for c in channels
        ]
        turns = itertools.islice(itertools.cycle(range(len(calls))), thread % len(calls), None)
        try:
            for turn in turns:
                if self._stop.is_set():
                    break
                self._call(calls[turn], self._addresses[turn])
        finally:
            for c in channels:
                c.close()

    def _call(self, collect: grpc.StreamUnaryMultiCallable, address: str) -> None:
        began = time.monotonic()
        now_ms = int(time.time() * 1000)
        made = [segment(n, now_ms, self._payload_bytes) for n in self._numbers()]
        status = "OK"
        try:
            collect(iter([pb for pb, _ in made]), timeout=self._timeout_s)
        except grpc.RpcError as e:
            status = e.code().name
        took, at = time.monotonic() - began, time.time()
        with self.ledger.lock:
            self.ledger.sent += len(made)
            self.ledger.slowest_answer_s = max(self.ledger.slowest_answer_s, took)
            if status == "OK":
                self.ledger.accepted += [Taken(*facts, address, at) for _, facts in made]
            else:
                self.ledger.refused[status] += len(made)
        self._stop.wait(max(0.0, self._pause_s - took))


def storage_config(es_url: str, redis_url: str, prefix: str) -> StorageConfig:
    return StorageConfig(
        kind=StorageKind.ELASTICSEARCH, es_hosts=es_url, es_index_prefix=prefix,
        redis_url=redis_url, redis_key_prefix=prefix,
    )  # fmt: skip


def stored_sums(config: StorageConfig, level: Downsampling) -> Sums:
    """The sums stored now: searched after a refresh, since a search sees a
    row only from the next refresh on (seconds later on a busy machine)."""
    with Elasticsearch(config.es_hosts, request_timeout=60) as es:
        es.indices.refresh(index=f"{config.es_index_prefix}_*metrics*", allow_no_indices=True)
    storage = open_storage(config)
    try:
        sums: Sums = {}
        for s in storage.metrics.query(ServiceMetrics, level, 0, 10**12, limit=10_000):
            sums[("service", s.time_bucket, s.service)] = (s.calls, s.latency_sum_ms)
        for e in storage.metrics.query(EndpointMetrics, level, 0, 10**12, limit=10_000):
            sums[("endpoint", e.time_bucket, f"{e.service}/{e.endpoint}")] = (e.calls, e.latency_sum_ms)
        return sums
    finally:
        storage.close()


def stored_segments(es_url: str, prefix: str) -> int:
    with Elasticsearch(es_url) as es:
        es.indices.refresh(index=f"{prefix}_segment-*")
        return int(es.count(index=f"{prefix}_segment-*")["count"])


def segment_ids(es_url: str, prefix: str) -> set[str]:
    with Elasticsearch(es_url) as es:
        es.indices.refresh(index=f"{prefix}_segment-*")
        return {h["_id"] for h in helpers.scan(es, index=f"{prefix}_segment-*", source=False)}


def unpublished(config: StorageConfig, timeout_s: float = 30.0) -> int:
    """Stored segments a reader of the topic does not find, once the ranges
    of a killed writer had time to pass their lease (``--topic-lease-s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = segment_ids(config.es_hosts, config.es_index_prefix) - {
            r.key for r in entries(config, "segment")
        }
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(1.0)


def entries(config: StorageConfig, topic: str) -> list[TopicRecord]:
    """What a reader of ``topic`` finds below the ends."""
    found: list[TopicRecord] = []
    with topics_of(config) as (topics, _):
        for b in topics.bounds(topic):
            offset = b.start
            while offset < b.end:
                fetched = topics.read(topic, b.partition, offset, 10_000)
                found += fetched.records
                offset = fetched.next_offset
    return found


def fingerprint(value: dict[str, object]) -> str:
    return json.dumps(value, sort_keys=True)


def stored_versions(config: StorageConfig) -> set[str]:
    """The current version of every stored service and endpoint metric row
    and every inventory row, as its topic entry's value."""
    storage = open_storage(config)
    try:
        versions = set()
        for model in (ServiceMetrics, EndpointMetrics):
            for level in Downsampling:
                table = Table(model, level)
                versions |= {
                    fingerprint(table.value(m)) for m in storage.metrics.query(model, level, 0, 10**12)
                }
        for inventory in INVENTORY_TYPES:
            versions |= {fingerprint(Table(inventory).value(i)) for i in storage.inventory.list(inventory)}
        return versions
    finally:
        storage.close()


def unpublished_rows(config: StorageConfig, versions: set[str] | None = None, timeout_s: float = 30.0) -> int:
    """Row versions (``versions``, or those stored now) a reader of the
    metrics and inventory topics does not find, once the ranges of a killed
    writer had time to pass their lease."""
    want = stored_versions(config) if versions is None else versions
    deadline = time.monotonic() + timeout_s
    while True:
        found = {fingerprint(r.value) for topic in ("metrics", "inventory") for r in entries(config, topic)}
        if not want - found or time.monotonic() > deadline:
            return len(want - found)
        time.sleep(1.0)


class VersionWatch:
    """Reads the rows of the service metrics of the current minute, hour and
    day every ``interval_s`` (by id, which sees every write at once) and
    keeps each version seen: versions a reader of the topic must find."""

    def __init__(self, config: StorageConfig, interval_s: float = 0.05) -> None:
        self._config = config
        self._interval_s = interval_s
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> VersionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        storage = open_storage(self._config)
        try:
            while not self._stop.wait(self._interval_s):
                now_ms = int(time.time() * 1000)
                for level in Downsampling:
                    keys = [
                        ServiceMetrics(time_bucket=level.bucket_of(now_ms), service=s).key() for s in SERVICES
                    ]
                    table = Table(ServiceMetrics, level)
                    with contextlib.suppress(StorageError):  # a fault under way: the next read sees it
                        rows = storage.metrics.get_many(ServiceMetrics, level, keys)
                        self.seen |= {fingerprint(table.value(r.item)) for r in rows.values()}
        finally:
            storage.close()


def wait_until_idle(nodes: Sequence[NodeProcess], timeout_s: float = 120.0) -> None:
    """Until the nodes hold nothing for storage or for each other, twice in a row."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 2:
        busy = 0.0
        for node in nodes:
            scrape = read_metrics(node.admin)
            busy += (
                scrape.value("skyoap_memory_held_bytes")
                + scrape.total("skyoap_metrics_pending")
                + scrape.total("skyoap_buffer_depth")
                + scrape.value("skyoap_remote_parked_items")
                + scrape.total("skyoap_remote_held_items")
            )
        quiet = quiet + 1 if busy == 0 else 0
        if time.monotonic() > deadline:
            raise AssertionError(f"the nodes still hold work after {timeout_s:g} s")
        time.sleep(1.0)


@dataclass
class Outcome:
    fault: str
    load: str
    sent: int
    accepted: int
    refused: dict[str, int]
    stored: int
    lost: int
    """The most segments missing from the records or from any level's sums."""
    double_counted: int
    """The most segments stored twice, or counted twice in any level's sums."""
    slowest_answer_s: float
    unconfirmed: int
    """Metric rows written with an unknown outcome (confirmed later from the rows)."""
    remote_unconfirmed: int = 0
    """Items between nodes whose stream was never confirmed (lost unless the target took them)."""
    lost_at_most: int | None = None
    """What a killed node may have held: the most it may lose."""
    unpublished: int = 0
    """Stored segments, and current versions of stored rows, not on their topics."""

    def line(self) -> str:
        refused = ", ".join(f"{n} {code}" for code, n in sorted(self.refused.items())) or "0"
        bound = "" if self.lost_at_most is None else f" (at most {self.lost_at_most})"
        return (
            f"| {self.fault} | {self.load} | {self.sent} | {self.accepted} | {refused} | {self.stored} "
            f"| {self.lost}{bound} | {self.double_counted} | {self.unconfirmed} | {self.remote_unconfirmed} "
            f"| {self.slowest_answer_s:.1f} s | {self.unpublished} |"
        )


def differences(want: Sums, got: Sums) -> tuple[int, int]:
    """Calls missing from ``got`` and calls it counts beyond ``want``, the
    most of either model (service, endpoint): each segment is one call of each."""
    missing: collections.Counter[str] = collections.Counter()
    extra: collections.Counter[str] = collections.Counter()
    for key in want.keys() | got.keys():
        diff = got.get(key, (0, 0))[0] - want.get(key, (0, 0))[0]
        extra[key[0]] += max(0, diff)
        missing[key[0]] += max(0, -diff)
    return max(missing.values(), default=0), max(extra.values(), default=0)


def settle(
    fault: str,
    load: str,
    ledger: Ledger,
    config: StorageConfig,
    nodes: NodeProcess | Sequence[NodeProcess],
    lost_at_most: int | None = None,
) -> tuple[Outcome, list[tuple[Downsampling, Sums, Sums]]]:
    """Waits until the nodes stored everything; returns the figures (printed,
    and kept in ``FIGURES``) and each level's expected and stored sums.
    ``lost_at_most`` is what a killed node may have held."""
    nodes = [nodes] if isinstance(nodes, NodeProcess) else nodes
    wait_until_idle(nodes)
    scrapes = [read_metrics(n.admin) for n in nodes]
    segments = stored_segments(config.es_hosts, config.es_index_prefix)
    levels = [(level, ledger.expected(level), stored_sums(config, level)) for level in Downsampling]
    accepted = len(ledger.accepted)
    lost, double = max(0, accepted - segments), max(0, segments - accepted)
    for _, want, got in levels:
        missing, extra = differences(want, got)
        lost, double = max(lost, missing), max(double, extra)
    outcome = Outcome(
        fault, load, ledger.sent, accepted, dict(ledger.refused), segments, lost, double,
        ledger.slowest_answer_s,
        int(sum(s.total("skyoap_metrics_unconfirmed_total") for s in scrapes)),
        int(sum(s.total("skyoap_remote_unconfirmed_total") for s in scrapes)), lost_at_most,
        unpublished(config) + unpublished_rows(config),
    )  # fmt: skip
    print(outcome.line())
    with FIGURES.open("a") as f:
        f.write(json.dumps(outcome.__dict__) + "\n")
    assert outcome.unpublished == 0, (
        f"{outcome.unpublished} stored segments or row versions are not on their topics"
    )
    return outcome, levels
