"""Simulated traces in SkyWalking's v3 protocol, as an agent would report them:
the demo and the benchmarks send them."""

from __future__ import annotations

import random
from collections.abc import Iterable

import grpc

from skyoap.proto.skywalking import common_pb2, tracing_pb2

POSTGRESQL = 22
"""The component id SkyWalking gives PostgreSQL's clients."""


def chain_trace(
    trace_id: str,
    services: list[str],
    start_ms: int,
    rng: random.Random,
    instances: dict[str, list[str]],
    endpoints: dict[str, list[str]],
    error_rate: float = 0.05,
    database: str = "",
) -> list[tracing_pb2.SegmentObject]:
    """One trace through ``services`` in turn: a segment per service, served by
    one of its ``instances`` at one of its ``endpoints``, with an entry span and,
    but for the last, an exit span to the next; 2n-1 spans in all. With a
    ``database`` (``host:port``), the last service queries it too (one more
    exit span, PostgreSQL's)."""
    segments = []
    parent: tracing_pb2.SegmentReference | None = None
    for i, service in enumerate(services):
        instance = rng.choice(instances[service])
        latency = int(rng.expovariate(1 / 40)) + 1
        error = rng.random() < error_rate
        endpoint = rng.choice(endpoints[service])
        spans = [
            tracing_pb2.SpanObject(
                spanId=0, parentSpanId=-1, spanType=tracing_pb2.Entry, spanLayer=tracing_pb2.Http,
                operationName=endpoint, startTime=start_ms, endTime=start_ms + latency, isError=error,
                refs=[parent] if parent else [],
            )
        ]  # fmt: skip
        segment_id = f"{trace_id}.{i}"
        if i + 1 < len(services):
            peer = f"{services[i + 1]}:8080"
            spans.append(
                tracing_pb2.SpanObject(
                    spanId=1, parentSpanId=0, spanType=tracing_pb2.Exit, spanLayer=tracing_pb2.Http,
                    operationName=f"GET:/{services[i + 1]}", peer=peer, startTime=start_ms + 1,
                    endTime=start_ms + latency, isError=error,
                )
            )  # fmt: skip
            parent = tracing_pb2.SegmentReference(
                refType=tracing_pb2.CrossProcess, traceId=trace_id, parentTraceSegmentId=segment_id,
                parentSpanId=1, parentService=service, parentServiceInstance=instance,
                parentEndpoint=endpoint, networkAddressUsedAtPeer=peer,
            )  # fmt: skip
        elif database:
            spans.append(
                tracing_pb2.SpanObject(
                    spanId=1, parentSpanId=0, spanType=tracing_pb2.Exit, spanLayer=tracing_pb2.Database,
                    operationName="PostgreSQL/SELECT", peer=database, componentId=POSTGRESQL,
                    startTime=start_ms + 1, endTime=start_ms + max(1, latency // 2), isError=error,
                    tags=[common_pb2.KeyStringValuePair(key="db.statement", value="SELECT * FROM orders")],
                )
            )  # fmt: skip
        segments.append(
            tracing_pb2.SegmentObject(
                traceId=trace_id, traceSegmentId=segment_id, service=service, serviceInstance=instance,
                spans=spans,
            )
        )  # fmt: skip
    return segments


def report(address: str, segments: Iterable[tracing_pb2.SegmentObject], timeout_s: float = 60.0) -> None:
    """Sends ``segments`` in one ``TraceSegmentReportService.collect`` stream."""
    with grpc.insecure_channel(address) as channel:
        channel.stream_unary(
            "/skywalking.v3.TraceSegmentReportService/collect",
            request_serializer=tracing_pb2.SegmentObject.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(iter(segments), timeout=timeout_s)
