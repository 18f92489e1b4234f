"""Databases and caches measured from their callers' spans, as SkyWalking
measures them: a call counted for each, by its operation for a cache, and
the slow ones sampled with their statement or command."""

from __future__ import annotations

import pytest

from skyoap.layers.spans import SlowThresholds, Thresholds
from skyoap.model.metrics import (
    CacheAccessMetrics,
    CallMetrics,
    DatabaseAccessMetrics,
    EndpointRelationMetrics,
    Metrics,
    MQAccessMetrics,
    MQEndpointAccessMetrics,
    NetworkAddressAlias,
    ServiceRelationMetrics,
    merge_into,
    minute_bucket,
)
from skyoap.model.records import SampledRecord
from skyoap.model.spans import CROSS_PROCESS, ENTRY, EXIT, Segment, Span, SpanKind, SpanRef
from skyoap.model.stream import ColumnType
from skyoap.receiver.segments import analyse

NOW = 1_795_514_400_000
"""2026-11-24 10:00 UTC."""
DATABASE, MQ, CACHE = 1, 4, 5


def span(
    layer: int, latency: int, peer: str, *details: tuple[str, str], kind: int = EXIT, error: bool = False
) -> Span:
    return Span(kind, layer, NOW, NOW + latency, "op", peer, error, False, (), len(details), 0, details)


def segment(*spans: Span) -> Segment:
    return Segment("t1", "s1", "shop", "shop-1", spans, b"")


def merged(metrics: list[Metrics]) -> list[CallMetrics]:
    """The virtual services' metrics, those of one key merged (as L1 merges them)."""
    totals: dict[str, CallMetrics] = {}
    virtual = (DatabaseAccessMetrics, CacheAccessMetrics, MQAccessMetrics, MQEndpointAccessMetrics)
    assert merge_into(totals, [m for m in metrics if isinstance(m, virtual)]) == []
    return list(totals.values())


def calls(metrics: list[Metrics]) -> dict[tuple[str, ...], tuple[int, int, int]]:
    """Each virtual service's calls, errors and latency sum, by its names."""
    return {
        (type(m).__name__, *(getattr(m, f) for f in ("service", "operation") if hasattr(m, f))): (
            m.calls, m.errors, m.latency_sum_ms,
        )
        for m in merged(metrics)
    }  # fmt: skip


PG = (("db.type", "PostgreSQL"), ("db.statement", "SELECT * FROM orders"))


def test_a_database_span_counts_a_call_for_the_database_its_peer_names() -> None:
    spans = [
        span(DATABASE, 30, "pg:5432", *PG),
        span(DATABASE, 250, "pg:5432", *PG, error=True),
        # A local span to a database counts too; one that names no peer does not.
        span(DATABASE, 5, "pg:5432", kind=SpanKind.LOCAL),
        span(DATABASE, 5, "", *PG),
    ]
    measured = analyse([segment(*spans)])
    assert calls(measured.metrics) == {("DatabaseAccessMetrics", "pg:5432"): (3, 1, 285)}
    (db,) = merged(measured.metrics)
    # The local span names no db.type: the database's is the one named.
    assert isinstance(db, DatabaseAccessMetrics) and (db.type, db.time_bucket) == (
        "PostgreSQL",
        minute_bucket(NOW),
    )
    # Past PostgreSQL's threshold (200 ms by default): sampled for the database and for its caller.
    assert [
        (s.metric, s.service, s.normal, s.statement, s.latency, s.trace_id) for s in measured.samples
    ] == [
        ("top_n_database_statement", "pg:5432", False, "SELECT * FROM orders", 250, "t1"),
        ("top_n_service_database_statement", "shop", True, "SELECT * FROM orders", 250, "t1"),
    ]
    assert [s.record_id for s in measured.samples] == [
        "top_n_database_statement/s1/1", "top_n_service_database_statement/s1/1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "details, latency, sampled",
    [
        (PG, 200, False),  # at the threshold: not past it
        (PG, 201, True),
        ((("db.type", "MongoDB"), ("db.statement", "find")), 101, True),  # mongodb's is 100 ms, any case
        ((("db.statement", "SELECT 1"),), 5_000, False),  # no db.type: never slow
        ((("db.type", "PostgreSQL"), ("db.statement", " ")), 5_000, False),  # no statement to keep
    ],
)
def test_a_database_call_is_sampled_past_its_types_threshold(
    details: tuple[tuple[str, str], ...], latency: int, sampled: bool
) -> None:
    measured = analyse([segment(span(DATABASE, latency, "db:1", *details))])
    assert len(measured.samples) == (2 if sampled else 0)


def test_a_long_statement_is_cut_to_2000_characters() -> None:
    statement = "SELECT " + "x" * 3000
    measured = analyse(
        [segment(span(DATABASE, 300, "db:1", ("db.type", "mysql"), ("db.statement", statement)))]
    )
    assert {s.statement for s in measured.samples} == {statement[:2000]}


def redis(op: str, latency: int, peer: str = "redis:6379", **more: str) -> Span:
    details = (
        ("cache.type", more.get("kind", "Redis")),
        ("cache.op", op),
        ("cache.cmd", "GET"),
        ("cache.key", "k"),
    )
    return span(CACHE, latency, peer, *details)


def test_a_cache_span_counts_for_the_cache_by_its_operation() -> None:
    measured = analyse([segment(redis("read", 4), redis("read", 11), redis("write", 3), redis("", 2),
                                # Local: named by its type; without a type: no cache at all.
                                redis("write", 1, peer=""), span(CACHE, 9, "redis:6379"))])  # fmt: skip
    assert calls(measured.metrics) == {
        ("CacheAccessMetrics", "redis:6379", "all"): (4, 0, 20),
        ("CacheAccessMetrics", "redis:6379", "read"): (2, 0, 15),
        ("CacheAccessMetrics", "redis:6379", "write"): (1, 0, 3),
        ("CacheAccessMetrics", "Redis-local", "all"): (1, 0, 1),
        ("CacheAccessMetrics", "Redis-local", "write"): (1, 0, 1),
    }
    # Redis's read threshold is 10 ms: the read of 11 ms is sampled as "GET k".
    assert [(s.metric, s.service, s.normal, s.statement, s.latency) for s in measured.samples] == [
        ("top_n_cache_read_command", "redis:6379", False, "GET k", 11),
    ]


def test_thresholds_are_read_as_skywalking_writes_them() -> None:
    read = Thresholds.parse("default:50, MongoDB:100,redis:5", "--x")
    assert (read.default_ms, dict(read.by_type), read.of("MONGODB"), read.of("pg")) == (
        50, {"mongodb": 100, "redis": 5}, 100, 50,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"--x: 'redis' is not TYPE:MS with a whole number of ms"):
        Thresholds.parse("default:5,redis", "--x")
    with pytest.raises(ValueError, match=r"--x: 'redis:5' gives no default:MS"):
        Thresholds.parse("redis:5", "--x")
    slow = SlowThresholds(database=Thresholds(1000))
    assert analyse([segment(span(DATABASE, 300, "db:1", *PG))], slow=slow).samples == []


def test_samples_are_records_of_their_minute() -> None:
    (sample, _) = analyse([segment(span(DATABASE, 300, "db:1", *PG))]).samples
    assert isinstance(sample, SampledRecord) and (sample.time_bucket, sample.timestamp) == (
        minute_bucket(NOW),
        NOW,
    )


def message(kind: int, peer: str, *refs: SpanRef, transit: str = "", latency: int = 3) -> Span:
    details = [("mq.topic", "orders"), ("mq.queue", "q1")]
    if transit:
        details.append(("transmission.latency", transit))
    return Span(
        kind, MQ, NOW, NOW + latency, "Kafka/orders/Consumer", peer, False, False, refs, 3, 41, tuple(details)
    )


def test_a_queue_span_counts_a_message_for_its_broker_by_its_time_in_transit() -> None:
    ref = SpanRef(CROSS_PROCESS, "shop", "shop-1", "POST:/order", "kafka:9092")
    consumed = Segment("t1", "s2", "billing", "billing-1", (message(ENTRY, "", ref, transit="40"),), b"")
    produced = segment(message(EXIT, "kafka:9092"), message(EXIT, "kafka:9092", transit="x"))
    # A consumer's span without a reference to its producer: the broker is its peer.
    alone = Segment("t2", "s3", "billing", "billing-1", (message(ENTRY, "kafka:9093", transit="7"),), b"")
    measured = analyse([consumed, produced, alone])
    queues = {
        (type(m).__name__, *(getattr(m, f) for f in ("service", "endpoint", "operation") if hasattr(m, f))): (
            m.calls, m.latency_sum_ms,
        )
        for m in merged(measured.metrics)
        if isinstance(m, MQAccessMetrics | MQEndpointAccessMetrics)
    }  # fmt: skip
    assert queues == {
        ("MQAccessMetrics", "kafka:9092", "consume"): (1, 40),
        ("MQEndpointAccessMetrics", "kafka:9092", "orders/q1", "consume"): (1, 40),
        ("MQAccessMetrics", "kafka:9092", "produce"): (2, 0),  # no number in transit: 0
        ("MQEndpointAccessMetrics", "kafka:9092", "orders/q1", "produce"): (2, 0),
        ("MQAccessMetrics", "kafka:9093", "consume"): (1, 7),
        ("MQEndpointAccessMetrics", "kafka:9093", "orders/q1", "consume"): (1, 7),
    }
    # The consumer is called by the broker, not the producer, whose endpoint
    # stays the caller of the consumer's; the broker is nobody's alias.
    relations = {
        (type(m).__name__, *(str(getattr(m, c.name)) for c in m.columns() if c.type is ColumnType.STRING))
        for m in measured.metrics
        if isinstance(m, ServiceRelationMetrics | EndpointRelationMetrics)
    }
    assert relations == {
        ("ServiceRelationMetrics", "kafka:9092", "billing", "server"),
        ("ServiceRelationMetrics", "kafka:9093", "billing", "server"),
        ("EndpointRelationMetrics", "shop", "POST:/order", "billing", "Kafka/orders/Consumer"),
        ("ServiceRelationMetrics", "shop", "kafka:9092", "client"),
    }
    assert not [m for m in measured.metrics if isinstance(m, NetworkAddressAlias)]
