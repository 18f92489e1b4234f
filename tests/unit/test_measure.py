"""``measure`` sums a chunk's spans by what they count for before it counts
each sum once per metric; what it answers must be what counting every span
for every metric, one by one, gives."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from skyoap.model import sketch
from skyoap.model.metrics import (
    ApdexThresholds,
    CallMetrics,
    EndpointMetrics,
    EndpointRelationMetrics,
    MQAccessMetrics,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.model.spans import CROSS_PROCESS, Segment, Span, SpanKind, SpanRef
from skyoap.receiver.segments import ENTITY_FIELDS, USER, CallAliases, measure, sightings

MINUTE_MS = 1_790_000_040_000 // 60_000 * 60_000
MQ = 4
APDEX = ApdexThresholds(default_ms=50, services={"svc-1": 5})


def random_segments(rng: random.Random, count: int) -> list[Segment]:
    services = [f"svc-{i}" for i in range(4)]

    def ref() -> SpanRef:
        caller = rng.choice([*services, ""])
        instance, endpoint = rng.choice(["", f"{caller}-a"]), rng.choice(["", "GET:/up"])
        return SpanRef(
            rng.choice([0, 0, 1]), caller, instance, endpoint, rng.choice(["", "svc-0:80", "10.0.0.1:80"])
        )

    def span() -> Span:
        start = MINUTE_MS + rng.randrange(-30_000, 90_000)
        latency = rng.choice(
            [0, 3, 5, 6, 20, 21, 40, 50, 51, 120, 200, 201, 700]
        )  # apdex's bounds and beside
        refs = tuple(ref() for _ in range(rng.choice([0, 1, 1, 2])))
        kind, operation, peer = (
            rng.choice([0, 0, 1, 1, 2]),
            rng.choice(["", "GET:/a"]),
            rng.choice(["", "db:3306", "svc-0:80"]),
        )
        error, skipped, component = rng.random() < 0.2, rng.random() < 0.1, rng.choice([0, 7, 7001, 7002])
        layer = rng.choice([0, 0, 0, MQ])  # a message queue's spans name their callers otherwise
        return Span(kind, layer, start, start + latency, operation, peer, error, skipped, refs, 0, component)

    segments = []
    for i in range(count):
        service = rng.choice(services)
        spans = tuple(span() for _ in range(1 + rng.randrange(5)))
        segments.append(Segment(f"t{i}", f"s{i}", service, f"{service}-{rng.randrange(2)}", spans, b""))
    return segments


def one_by_one(segments: list[Segment]) -> dict[tuple[Any, ...], list[Any]]:
    """Every span counted for every metric it makes, one at a time."""
    known = CallAliases()
    known.learn(sightings(segments))
    sums: dict[tuple[Any, ...], list[Any]] = defaultdict(lambda: [0, 0, 0, [], 0, 0, set()])

    def count(
        model: type[CallMetrics],
        names: tuple[str, ...],
        span: Span,
        apdex: bool = False,
        latency: int | None = None,
    ) -> None:
        latency = span.end_time - span.start_time if latency is None else latency
        held = sums[(model, names, minute_bucket(span.start_time))]
        held[0] += 1
        held[1] += span.is_error
        held[2] += latency
        held[3].append(latency)
        if model is ServiceRelationMetrics:
            held[6].add(span.component)
        threshold = APDEX.of(names[0])
        if apdex and not span.is_error:
            held[4] += latency <= threshold
            held[5] += threshold < latency <= 4 * threshold

    for segment in segments:
        service, instance = segment.service, segment.instance
        for span in segment.spans:
            if span.skip_analysis:
                continue
            if span.kind == SpanKind.ENTRY:
                count(ServiceMetrics, (service,), span, apdex=True)
                count(ServiceInstanceMetrics, (service, instance), span)
                if span.operation:
                    count(EndpointMetrics, (service, span.operation), span)
                crossing = [r for r in span.refs if r.ref_type == CROSS_PROCESS]
                if span.layer == MQ:
                    # The broker calls: the address the reference names, else the span's peer.
                    used = span.refs[0].address if span.refs else ""
                    broker = used if used.strip() else span.peer
                    if broker:
                        count(MQAccessMetrics, (broker, "consume"), span, latency=0)
                    callers = {
                        (r.address, r.address, r.parent_endpoint, r.parent_service) if r.address.strip()
                        else (r.parent_service, r.parent_instance, r.parent_endpoint, r.parent_service)
                        for r in crossing if r.parent_service
                    }  # fmt: skip
                    if not crossing:
                        callers = (
                            {(span.peer, span.peer, "", "")} if span.peer else {(USER, USER, USER, USER)}
                        )
                else:
                    callers = {
                        (r.parent_service, r.parent_instance, r.parent_endpoint, r.parent_service)
                        for r in crossing
                        if r.parent_service
                    } if crossing else {(USER, USER, USER, USER)}  # fmt: skip
                for c_service, c_instance, c_endpoint, owner in callers:
                    count(ServiceRelationMetrics, (c_service, service, "server"), span)
                    if c_instance:
                        count(
                            ServiceInstanceRelationMetrics,
                            (c_service, c_instance, service, instance, "server"),
                            span,
                        )
                    if c_endpoint and span.operation:
                        count(EndpointRelationMetrics, (owner, c_endpoint, service, span.operation), span)
            elif span.kind == SpanKind.EXIT and span.peer:
                if span.layer == MQ:
                    count(MQAccessMetrics, (span.peer, "produce"), span, latency=0)
                alias = known.get(span.peer)
                dest, dest_instance = (alias.service, alias.instance) if alias else (span.peer, span.peer)
                count(ServiceRelationMetrics, (service, dest, "client"), span)
                count(
                    ServiceInstanceRelationMetrics, (service, instance, dest, dest_instance, "client"), span
                )
    return {k: [*v[:3], sketch.of_latencies(v[3]), *v[4:6], tuple(sorted(v[6]))] for k, v in sums.items()}


@pytest.mark.parametrize("seed", range(10))
def test_measuring_a_chunk_counts_what_each_span_counts_for(seed: int) -> None:
    segments = random_segments(random.Random(seed), 300)
    measured = {}
    for m in measure(segments, APDEX):
        if isinstance(m, CallMetrics):
            names = tuple(str(getattr(m, f)) for f in ENTITY_FIELDS[type(m)])
            apdex = [m.apdex_satisfied, m.apdex_tolerating] if isinstance(m, ServiceMetrics) else [0, 0]
            components = m.components if isinstance(m, ServiceRelationMetrics) else ()
            measured[(type(m), names, m.time_bucket)] = [
                m.calls,
                m.errors,
                m.latency_sum_ms,
                m.histogram,
                *apdex,
                components,
            ]
    expected = one_by_one(segments)
    assert measured == expected
    assert len(expected) > 100
