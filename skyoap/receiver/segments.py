"""Trace segments as the receiver reads them, and what it derives from each:
the segment record, and one call per entry span for its service, instance,
endpoint and the relations to its caller (service, instance and endpoint),
one per exit span for the relations to the peer it called (service and
instance), and the network address aliases entry spans show (SkyWalking's
multi-scope span analysis)."""

from __future__ import annotations

import base64
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.model.inventory import OTHER, DetectPoint
from skyoap.model.metrics import (
    LATENCY_BUCKETS_MS,
    ApdexThresholds,
    CallMetrics,
    EndpointMetrics,
    EndpointRelationMetrics,
    Metrics,
    NetworkAddressAlias,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    latency_bucket,
    minute_bucket,
)
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Text

DEFAULT_APDEX = ApdexThresholds()

USER = "User"
"""The caller of an entry span no other traced service called (SkyWalking's name)."""


class SpanKind(enum.IntEnum):  # the protocol's SpanType
    ENTRY = 0
    EXIT = 1
    LOCAL = 2


SPAN_LAYERS = range(7)  # Unknown, Database, RPCFramework, Http, MQ, Cache, FAAS
REF_TYPES = range(2)  # CrossProcess, CrossThread
CROSS_PROCESS = 0
SERVER, CLIENT = DetectPoint.SERVER.value, DetectPoint.CLIENT.value


# Spans and references are named tuples rather than frozen dataclasses: a node
# builds millions of them, and a tuple is built in a third of the time.
class SpanRef(NamedTuple):
    ref_type: int
    parent_service: str
    parent_instance: str
    parent_endpoint: str
    address: str
    """The address the caller used to reach this service."""


class Span(NamedTuple):
    kind: int
    layer: int
    start_time: int
    end_time: int
    operation: str
    peer: str
    is_error: bool
    skip_analysis: bool
    refs: tuple[SpanRef, ...]
    tags: int
    """How many tags the span carries (they stay in the segment's data)."""


@dataclass(frozen=True, slots=True)
class Segment:
    trace_id: str
    segment_id: str
    service: str
    instance: str
    spans: tuple[Span, ...]
    data: bytes
    """The segment as the agent encoded it."""
    tags: tuple[str, ...] = ()
    """Its spans' searchable tags, ``key=value``, distinct and sorted (``searchable_tags``)."""


SEARCHABLE_TRACE_TAGS = (
    "http.method",
    "http.status_code",
    "rpc.status_code",
    "db.type",
    "db.instance",
    "mq.queue",
    "mq.topic",
    "mq.broker",
)
"""SkyWalking's default ``searchableTracesTags``: the span tags traces are found by."""

MAX_SEARCHABLE_TAG_CHARS = 256
"""The longest ``key=value`` kept searchable; a longer one (a whole URL, a
statement) stays in the segment's data but is not searched by."""


def searchable_tags(pairs: Iterable[tuple[str, str]], keys: frozenset[str]) -> tuple[str, ...]:
    """The ``key=value`` of the ``pairs`` whose key is one of ``keys``, distinct and sorted."""
    found = {f"{k}={v}" for k, v in pairs if k in keys}
    return tuple(sorted(t for t in found if len(t) <= MAX_SEARCHABLE_TAG_CHARS))


def check(segment: Segment, limits: TelemetryLimits, now_ms: int) -> None:
    """Raises Refused if the segment cannot be analysed as it is."""
    limits.name("traceId", segment.trace_id)
    limits.name("traceSegmentId", segment.segment_id)
    limits.name("service", segment.service)
    limits.name("serviceInstance", segment.instance)
    if not segment.spans:
        raise Refused(Reason.NO_SPANS, f"segment {segment.segment_id} has no spans")
    limits.at_most(
        f"spans of segment {segment.segment_id}",
        len(segment.spans),
        limits.max_spans_per_segment,
        "--max-spans-per-segment",
    )
    for span in segment.spans:
        if span.kind not in SpanKind._value2member_map_:
            raise Refused(Reason.UNKNOWN_ENUM, f"spanType {span.kind} is not one of Entry, Exit, Local")
        if span.layer not in SPAN_LAYERS:
            raise Refused(Reason.UNKNOWN_ENUM, f"spanLayer {span.layer} is not a known layer")
        limits.time("startTime", span.start_time, now_ms)
        limits.time("endTime", span.end_time, now_ms)
        if span.end_time < span.start_time:
            raise Refused(
                Reason.END_BEFORE_START,
                f"a span of segment {segment.segment_id} ends ({span.end_time}) "
                f"before it starts ({span.start_time})",
            )
        limits.name("operationName", span.operation, required=False)
        limits.name("peer", span.peer, required=False)
        limits.at_most(
            f"references of a span of segment {segment.segment_id}",
            len(span.refs),
            limits.max_refs_per_span,
            "--max-refs-per-span",
        )
        limits.at_most(
            f"tags of a span of segment {segment.segment_id}",
            span.tags,
            limits.max_tags_per_item,
            "--max-tags-per-item",
        )
        for ref in span.refs:
            if ref.ref_type not in REF_TYPES:
                raise Refused(
                    Reason.UNKNOWN_ENUM, f"refType {ref.ref_type} is not CrossProcess or CrossThread"
                )
            limits.name("parentService", ref.parent_service, required=False)
            limits.name("parentServiceInstance", ref.parent_instance, required=False)
            limits.name("parentEndpoint", ref.parent_endpoint, required=False)
            limits.name("networkAddressUsedAtPeer", ref.address, required=False)


def record_of(segment: Segment) -> SegmentRecord:
    first = segment.spans[0]
    entry = next((s for s in segment.spans if s.kind == SpanKind.ENTRY), first)
    start = min(s.start_time for s in segment.spans)
    end = max(s.end_time for s in segment.spans)
    return SegmentRecord(
        time_bucket=minute_bucket(start),
        segment_id=segment.segment_id,
        trace_id=segment.trace_id,
        service=segment.service,
        instance=segment.instance,
        endpoint=entry.operation,
        start_time=start,
        end_time=end,
        latency_ms=end - start,
        is_error=any(s.is_error for s in segment.spans),
        spans=len(segment.spans),
        data=Text(base64.b64encode(segment.data).decode()),
        tags=segment.tags,
    )


class Caller(NamedTuple):
    """Where a call came from: the caller's service, instance and the endpoint
    (its entry) the call was made in."""

    service: str
    instance: str
    endpoint: str


class Call(NamedTuple):
    """One span's call: its minute, latency, whether it failed, and its
    latency histogram bucket."""

    minute: int
    latency: int
    error: bool
    slot: int

    @classmethod
    def of(cls, span: Span) -> Call:
        latency = span.end_time - span.start_time
        return cls(minute_bucket(span.start_time), latency, span.is_error, latency_bucket(latency))


class Calls:
    """Calls summed per scope, entity and minute: one metric value per key
    rather than one per span and scope, so that L1 starts from the sums of a
    whole chunk."""

    def __init__(self, apdex: ApdexThresholds = DEFAULT_APDEX) -> None:
        self._apdex = apdex
        # (model, entity names, minute) -> [calls, errors, latency sum, histogram, satisfied, tolerating]
        self._sums: dict[tuple[type[CallMetrics], tuple[str, ...], int], list[Any]] = {}

    def count(self, model: type[CallMetrics], names: tuple[str, ...], call: Call) -> list[Any]:
        key = (model, names, call.minute)
        acc = self._sums.get(key)
        if acc is None:
            acc = self._sums[key] = [0, 0, 0, [0] * len(LATENCY_BUCKETS_MS), 0, 0]
        acc[0] += 1
        acc[1] += call.error
        acc[2] += call.latency
        acc[3][call.slot] += 1
        return acc

    def service(self, service: str, call: Call) -> None:
        """A call ``service`` served: counted with its apdex level."""
        acc = self.count(ServiceMetrics, (service,), call)
        if not call.error:
            threshold = self._apdex.of(service)
            if call.latency <= threshold:
                acc[4] += 1
            elif call.latency <= 4 * threshold:
                acc[5] += 1

    def served(self, caller: Caller, service: str, instance: str, endpoint: str, call: Call) -> None:
        """``endpoint`` of ``instance`` of ``service`` served ``call`` from
        ``caller``: the relations the callee sees (server side)."""
        self.count(ServiceRelationMetrics, (caller.service, service, SERVER), call)
        if caller.instance:
            names = (caller.service, caller.instance, service, instance, SERVER)
            self.count(ServiceInstanceRelationMetrics, names, call)
        if caller.endpoint and endpoint:
            self.count(EndpointRelationMetrics, (caller.service, caller.endpoint, service, endpoint), call)

    def called(
        self, service: str, instance: str, peer: str, alias: NetworkAddressAlias | None, call: Call
    ) -> None:
        """``instance`` of ``service`` made ``call`` to the address ``peer``:
        the relations the caller sees (client side), to the service and
        instance ``alias`` names, else to the address as a service and an
        instance of its own (what SkyWalking draws as a conjectured node)."""
        dest, dest_instance = (alias.service, alias.instance) if alias is not None else (peer, peer)
        self.count(ServiceRelationMetrics, (service, dest, CLIENT), call)
        self.count(ServiceInstanceRelationMetrics, (service, instance, dest, dest_instance, CLIENT), call)

    def metrics(self) -> list[CallMetrics]:
        return [
            model(
                time_bucket=minute,
                calls=calls,
                errors=errors,
                latency_sum_ms=latency_sum,
                histogram=tuple(histogram),
                **dict(zip(ENTITY_FIELDS[model], names, strict=True)),
                **(
                    {"apdex_satisfied": satisfied, "apdex_tolerating": tolerating}
                    if model is ServiceMetrics
                    else {}
                ),
            )
            for (model, names, minute), (calls, errors, latency_sum, histogram, satisfied, tolerating) in (
                self._sums.items()
            )
        ]


class Aliases(Protocol):
    """Where exit spans find what the address they called stands for: the
    network address aliases entry spans showed (``receiver/aliases.py``)."""

    def learn(self, aliases: Iterable[NetworkAddressAlias]) -> None: ...

    def get(self, address: str) -> NetworkAddressAlias | None: ...


class CallAliases:
    """The aliases of one call's segments alone (``measure`` without a node's cache)."""

    def __init__(self) -> None:
        self._by_address: dict[str, NetworkAddressAlias] = {}

    def learn(self, aliases: Iterable[NetworkAddressAlias]) -> None:
        for alias in aliases:
            held = self._by_address.get(alias.address)
            self._by_address[alias.address] = alias if held is None else held.combine(alias)

    def get(self, address: str) -> NetworkAddressAlias | None:
        return self._by_address.get(address)


def sightings(segments: Sequence[Segment]) -> list[NetworkAddressAlias]:
    """The aliases the entry spans of ``segments`` show, the latest of each
    address and minute: a cross-process reference that names the address its
    caller used (``networkAddressUsedAtPeer``) makes that address an alias of
    the span's service and instance. An address the guards folded into
    ``OTHER`` stands for many, and is no alias."""
    seen: dict[tuple[str, int], NetworkAddressAlias] = {}
    for segment in segments:
        for span in segment.spans:
            if span.kind != SpanKind.ENTRY or span.skip_analysis:
                continue
            for ref in span.refs:
                if ref.ref_type != CROSS_PROCESS or not ref.address or ref.address == OTHER:
                    continue
                key = (ref.address, minute_bucket(span.start_time))
                held = seen.get(key)
                if held is None or held.recency() < (span.start_time, segment.service, segment.instance):
                    seen[key] = NetworkAddressAlias(
                        time_bucket=key[1],
                        address=ref.address,
                        service=segment.service,
                        instance=segment.instance,
                        last_seen=span.start_time,
                    )
    return list(seen.values())


def measure(
    segments: list[Segment], apdex: ApdexThresholds = DEFAULT_APDEX, aliases: Aliases | None = None
) -> list[Metrics]:
    """What the spans of ``segments`` count for: each entry span one call for
    its service, instance and endpoint and one for each caller its references
    name (a ``User`` call if it has none), each exit span one for the
    relations to the peer it called, measured through ``aliases`` (those of
    the segments alone without it); and the aliases the entry spans show
    (``sightings``). Those are learned before any exit span is measured, so
    that a caller's and a callee's segments taken together count one
    relation from the first call. An entry whose references name no service
    (its caller is not known yet) counts no relation."""
    known = CallAliases() if aliases is None else aliases
    seen = sightings(segments)
    if seen:
        known.learn(seen)
    calls = Calls(apdex)
    for segment in segments:
        service, instance = segment.service, segment.instance
        for span in segment.spans:
            if span.skip_analysis:
                continue
            if span.kind == SpanKind.ENTRY:
                _entry(calls, service, instance, span)
            elif span.kind == SpanKind.EXIT and span.peer:
                calls.called(service, instance, span.peer, known.get(span.peer), Call.of(span))
    return [*calls.metrics(), *seen]


def _entry(calls: Calls, service: str, instance: str, span: Span) -> None:
    """The calls an entry span of ``instance`` of ``service`` counts."""
    call = Call.of(span)
    calls.service(service, call)
    calls.count(ServiceInstanceMetrics, (service, instance), call)
    if span.operation:
        calls.count(EndpointMetrics, (service, span.operation), call)
    callers = {
        Caller(r.parent_service, r.parent_instance, r.parent_endpoint)
        for r in span.refs
        if r.ref_type == CROSS_PROCESS and r.parent_service
    }
    if not any(r.ref_type == CROSS_PROCESS for r in span.refs):
        callers = {Caller(USER, "", "")}
    for caller in callers:
        calls.served(caller, service, instance, span.operation, call)


ENTITY_FIELDS: dict[type[CallMetrics], tuple[str, ...]] = {
    ServiceMetrics: ("service",),
    ServiceInstanceMetrics: ("service", "instance"),
    EndpointMetrics: ("service", "endpoint"),
    ServiceRelationMetrics: ("source", "dest", "detect_point"),
    ServiceInstanceRelationMetrics: (
        "source_service",
        "source_instance",
        "dest_service",
        "dest_instance",
        "detect_point",
    ),
    EndpointRelationMetrics: ("source_service", "source_endpoint", "dest_service", "dest_endpoint"),
}
