"""A known set of trace segments, and the metrics it must give, computed here
from the definitions (sorted latencies, not histograms) rather than by the
project's code."""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field

import grpc

from skyoap.model.metrics import CALL_METRICS, CallMetrics, Downsampling
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.storage.config import StorageConfig
from skyoap.storage.select import open_storage

LATENCIES = [0, 1, 2, 4, 5, 9, 10, 29, 30, 49, 50, 99, 100, 250, 999, 1000, 5000, 70_000]
READ_AS = {250: 251, 999: 997, 1000: 997, 5000: 4989, 70_000: 69_918}
"""What a percentile at each of ``LATENCIES`` reads, where it is not the latency
itself: the value its bucket stands for, within 1% (docs/metrics.md)."""
assert all(abs(read - ms) <= ms / 100 for ms, read in READ_AS.items())
ENTITY_FIELDS = (
    *("service", "instance", "endpoint", "source", "dest"),
    *(
        "source_service",
        "source_instance",
        "source_endpoint",
        "dest_service",
        "dest_instance",
        "dest_endpoint",
    ),
    "detect_point",
)


def utc_minute(ms: int) -> int:
    return int(time.strftime("%Y%m%d%H%M", time.gmtime(ms // 1000)))


APDEX_T = 500
"""The apdex threshold of every service (the default)."""


@dataclass
class Expected:
    # (model name, entity names, minute) -> each call's latency and whether it failed
    calls: dict[tuple[str, tuple[str, ...], int], list[tuple[int, bool]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    spans: int = 0

    def call(self, model: str, entity: tuple[str, ...], start_ms: int, latency: int, error: bool) -> None:
        self.calls[(model, entity, utc_minute(start_ms))].append((latency, error))

    def rows(self, level: Downsampling) -> dict[tuple[str, tuple[str, ...], int], dict[str, object]]:
        divisor = {Downsampling.MINUTE: 1, Downsampling.HOUR: 100, Downsampling.DAY: 10_000}[level]
        merged: dict[tuple[str, tuple[str, ...], int], list[tuple[int, bool]]] = defaultdict(list)
        for (model, entity, minute), calls in self.calls.items():
            merged[(model, entity, minute // divisor)] += calls
        minutes = {Downsampling.MINUTE: 1, Downsampling.HOUR: 60, Downsampling.DAY: 1440}[level]
        return {key: summary(key[0], calls, minutes) for key, calls in merged.items()}


def summary(model: str, calls: list[tuple[int, bool]], minutes: int) -> dict[str, object]:
    """What SkyWalking calls these figures: ``minutes`` is how long the bucket is."""
    ordered = sorted(latency for latency, _ in calls)
    n, errors = len(ordered), sum(error for _, error in calls)

    def percentile(p: int) -> int:
        value = ordered[math.ceil(p * n / 100) - 1]
        return READ_AS.get(value, value)

    out: dict[str, object] = {
        "calls": n,
        "errors": errors,
        "latency_sum_ms": sum(ordered),
        "cpm": n / minutes,
        "resp_time": sum(ordered) // n,
        "sla": (n - errors) * 10_000 // n,
        **{f"p{p}": percentile(p) for p in (50, 75, 90, 95, 99)},
    }
    if model == "ServiceMetrics":  # satisfied within T, tolerating within 4T, failed calls frustrated
        satisfied = sum(1 for latency, error in calls if not error and latency <= APDEX_T)
        tolerating = sum(1 for latency, error in calls if not error and APDEX_T < latency <= 4 * APDEX_T)
        out["apdex"] = int((satisfied + tolerating / 2) * 10_000 / n)
    return out


def stored_rows(
    config: StorageConfig, level: Downsampling
) -> dict[tuple[str, tuple[str, ...], int], dict[str, object]]:
    """Every call metric stored at ``level``, in the shape of ``Expected.rows``."""
    storage = open_storage(config)
    try:
        out = {}
        for model in CALL_METRICS:
            for row in storage.metrics.query(model, level, 0, 999_999_999_999):
                out[(model.__name__, entity_of(row), row.time_bucket)] = {
                    k: v for k, v in row.to_row().items() if k in SUMMARY_FIELDS
                }
        return out
    finally:
        storage.close()


SUMMARY_FIELDS = {
    "calls",
    "errors",
    "latency_sum_ms",
    "cpm",
    "resp_time",
    "sla",
    "apdex",
    "p50",
    "p75",
    "p90",
    "p95",
    "p99",
}


def entity_of(row: CallMetrics) -> tuple[str, ...]:
    return tuple(getattr(row, f) for f in ENTITY_FIELDS if hasattr(row, f))


def traces(count: int, seed: int = 7) -> tuple[list[tracing_pb2.SegmentObject], Expected]:
    """``count`` traces through gateway -> orders -> mysql over this minute and
    the one before, each two segments of 5 spans in all (the gateway's, then
    the one of orders); and what they must give when both segments of a trace
    come in one call."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    this_minute = now - now % 60_000
    segments: list[tracing_pb2.SegmentObject] = []
    expected = Expected()
    for i in range(count):
        start = rng.choice([this_minute - 60_000, this_minute]) + rng.randrange(0, 50_000)
        gw_instance = f"gateway-{i % 2 + 1}"
        path = rng.choice(["GET:/checkout", "GET:/cart"])
        gw_latency, orders_latency, db_latency, call_latency = (rng.choice(LATENCIES) for _ in range(4))
        gw_error, orders_error = rng.random() < 0.2, rng.random() < 0.1
        segments.append(
            tracing_pb2.SegmentObject(
                traceId=f"trace-{i}",
                traceSegmentId=f"gw-{i}",
                service="gateway",
                serviceInstance=gw_instance,
                spans=[
                    span(0, -1, tracing_pb2.Entry, start, gw_latency, gw_error, operationName=path),
                    span(1, 0, tracing_pb2.Exit, start, call_latency, orders_error, peer="orders:8080"),
                ],
            )
        )
        ref = tracing_pb2.SegmentReference(
            refType=tracing_pb2.CrossProcess, traceId=f"trace-{i}", parentTraceSegmentId=f"gw-{i}",
            parentSpanId=1, parentService="gateway", parentServiceInstance=gw_instance,
            parentEndpoint=path, networkAddressUsedAtPeer="orders:8080",
        )  # fmt: skip
        segments.append(
            tracing_pb2.SegmentObject(
                traceId=f"trace-{i}",
                traceSegmentId=f"orders-{i}",
                service="orders",
                serviceInstance="orders-1",
                spans=[
                    span(
                        0,
                        -1,
                        tracing_pb2.Entry,
                        start,
                        orders_latency,
                        orders_error,
                        operationName="POST:/order",
                        refs=[ref],
                    ),
                    span(1, 0, tracing_pb2.Local, start, 1, False, operationName="validate"),
                    span(
                        2,
                        0,
                        tracing_pb2.Exit,
                        start,
                        db_latency,
                        False,
                        peer="mysql:3306",
                        spanLayer=tracing_pb2.Database,
                    ),
                ],
            )
        )
        expected.spans += 5
        for service, instance, endpoint, caller, latency, error in (
            ("gateway", gw_instance, path, "User", gw_latency, gw_error),
            ("orders", "orders-1", "POST:/order", "gateway", orders_latency, orders_error),
        ):
            expected.call("ServiceMetrics", (service,), start, latency, error)
            expected.call("ServiceInstanceMetrics", (service, instance), start, latency, error)
            expected.call("EndpointMetrics", (service, endpoint), start, latency, error)
            expected.call("ServiceRelationMetrics", (caller, service, "server"), start, latency, error)
        # An entry span no traced service called: User's instance and endpoint called it.
        user = (start, gw_latency, gw_error)
        expected.call(
            "ServiceInstanceRelationMetrics", ("User", "User", "gateway", gw_instance, "server"), *user
        )
        expected.call("EndpointRelationMetrics", ("User", "User", "gateway", path), *user)
        # The callee's side of gateway -> orders, from its reference to the caller.
        callee = (start, orders_latency, orders_error)
        expected.call(
            "ServiceInstanceRelationMetrics",
            ("gateway", gw_instance, "orders", "orders-1", "server"),
            *callee,
        )
        expected.call("EndpointRelationMetrics", ("gateway", path, "orders", "POST:/order"), *callee)
        # The callers' side. Orders' reference names orders:8080 as the address
        # gateway used, an alias of orders (learned before the exits of the
        # call that carries both segments are measured); nobody reports from
        # mysql:3306, which stays an address, a service and an instance of its own.
        for source, instance, dest, dest_instance, side in (
            ("gateway", gw_instance, "orders", "orders-1", (start, call_latency, orders_error)),
            ("orders", "orders-1", "mysql:3306", "mysql:3306", (start, db_latency, False)),
        ):
            expected.call("ServiceRelationMetrics", (source, dest, "client"), *side)
            names = (source, instance, dest, dest_instance, "client")
            expected.call("ServiceInstanceRelationMetrics", names, *side)
        # A span of the Database layer counts a call for the database, too.
        expected.call("DatabaseAccessMetrics", ("mysql:3306",), start, db_latency, False)
    return segments, expected


def span(
    span_id: int, parent: int, kind: int, start: int, latency: int, error: bool, **fields: object
) -> tracing_pb2.SpanObject:
    return tracing_pb2.SpanObject(
        spanId=span_id, parentSpanId=parent, spanType=kind,  # type: ignore[arg-type]
        startTime=start, endTime=start + latency, isError=error, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def collect(address: str, segments: list[tracing_pb2.SegmentObject]) -> None:
    """Sends ``segments`` in one TraceSegmentReportService.collect stream."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_unary(
            "/skywalking.v3.TraceSegmentReportService/collect",
            request_serializer=tracing_pb2.SegmentObject.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        call(iter(segments), timeout=60)
