"""OpenTelemetry's protocol (OTLP 1.x over gRPC) on the agent port: what
OpenTelemetry SDKs export becomes what SkyWalking's agents report.

- **Spans.** The spans of one trace from one service instance in one export
  make a segment (``segment_object``): SERVER and CONSUMER spans are entries,
  CLIENT and PRODUCER spans exits (their peer is ``peer.service``, else
  ``server.address``/``net.peer.name`` with the port), the rest local; status
  ERROR is an error. The segment is then taken as a SkyWalking agent's is:
  stored as a record, measured, its names registered.
- **Callers.** OTLP does not say which service called an entry span; its
  parent span does, and that span usually arrives later (a client span ends
  after the server span it waited for). ``Callers`` remembers recent spans and
  counts the callee's side of a relation once the parent and the entry it was
  made in are known, or drops it after ``wait_s`` (counted).
- **Metrics** (gauge, sum, histogram) become meters; **log records** become
  logs with their trace context.

What is refused is answered as OTLP's partial success: how many items were
rejected and why the first was. The node's agent token applies here as on
every agent service.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import grpc

from skyoap.edge.server import GrpcServer
from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.model.metrics import Meter, MeterMetrics, add_to, minute_bucket
from skyoap.model.records import LogRecord
from skyoap.model.spans import SpanKind, SpanLayer
from skyoap.proto.otlp import (
    common_pb2,
    logs_pb2,
    logs_service_pb2,
    metrics_pb2,
    metrics_service_pb2,
    resource_pb2,
    trace_pb2,
    trace_service_pb2,
)
from skyoap.proto.skywalking import common_pb2 as sw_common_pb2
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver import otlp_samples
from skyoap.receiver.cardinality import Cardinality
from skyoap.receiver.checks import Refusals
from skyoap.receiver.intake import Intake, Sinks, log_record
from skyoap.receiver.meter_analysis import MeterAnalyzer
from skyoap.receiver.registration import NamesByService
from skyoap.receiver.segments import Call, Caller, Calls
from skyoap.receiver.traces import SegmentIntake
from skyoap.runtime import clock
from skyoap.runtime.budget import Overloaded, memory_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic

log = logging.getLogger(__name__)

OtlpSpan = trace_pb2.Span
ENTRY_KINDS = (OtlpSpan.SPAN_KIND_SERVER, OtlpSpan.SPAN_KIND_CONSUMER)
KINDS = {
    **dict.fromkeys(ENTRY_KINDS, SpanKind.ENTRY),
    **dict.fromkeys((OtlpSpan.SPAN_KIND_CLIENT, OtlpSpan.SPAN_KIND_PRODUCER), SpanKind.EXIT),
}
"""OTLP's span kinds as SkyWalking's span types; the others are local spans."""
HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200
"""The span flags' bits saying whether the parent's remoteness is known, and whether it is remote."""

LAYERS = (
    ("db.system", SpanLayer.DATABASE.value),
    ("rpc.system", SpanLayer.RPC_FRAMEWORK.value),
    ("http.request.method", SpanLayer.HTTP.value),
    ("http.method", SpanLayer.HTTP.value),
    ("messaging.system", SpanLayer.MQ.value),
)
"""The attribute that marks a span's layer, first match (otherwise Unknown)."""


def text_of(value: common_pb2.AnyValue) -> str:
    """An attribute's value as text: strings as they are, the rest as JSON."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    return json.dumps(_plain(value), separators=(",", ":"))


def _plain(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_plain(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    plain = getattr(value, kind)
    return plain if not (isinstance(plain, float) and not math.isfinite(plain)) else str(plain)


def attributes(kvs: Iterable[common_pb2.KeyValue]) -> dict[str, str]:
    return {kv.key: text_of(kv.value) for kv in kvs}


@dataclass(frozen=True)
class Source:
    """The service instance an export's resource names."""

    service: str
    instance: str


def source_of(resource: resource_pb2.Resource, peer_host: str, limits: TelemetryLimits) -> Source:
    """The resource's ``service.name``, and its ``service.instance.id`` (else
    its ``host.name``, else the address it reports from); Refused without a
    service name."""
    attrs = attributes(resource.attributes)
    service = limits.name("service.name", attrs.get("service.name", ""))
    instance = attrs.get("service.instance.id") or attrs.get("host.name") or peer_host
    return Source(service, limits.name("service.instance.id", instance))


def peer_host(context: grpc.ServicerContext) -> str:
    """The host a call comes from (``ipv4:127.0.0.1:5000`` → ``127.0.0.1``)."""
    peer = context.peer() or ""
    address = peer.partition(":")[2]
    host = address.rpartition(":")[0] or address
    return host.strip("[]") or "unknown"


def _address(attrs: Mapping[str, str], host_keys: tuple[str, ...], port_keys: tuple[str, ...]) -> str:
    host = next((attrs[k] for k in host_keys if attrs.get(k)), "")
    port = next((attrs[k] for k in port_keys if attrs.get(k)), "")
    return f"{host}:{port}" if host and port else host


def peer_of(attrs: Mapping[str, str]) -> str:
    """Whom an exit span called: ``peer.service``, else the address it used."""
    return attrs.get("peer.service") or _address(
        attrs, ("server.address", "net.peer.name"), ("server.port", "net.peer.port")
    )


def _ms(nanos: int) -> int:
    return nanos // 1_000_000


def _remote_parent(span: OtlpSpan) -> bool | None:
    """Whether the span's parent is in another process; None when the SDK did not say."""
    if span.flags & HAS_IS_REMOTE:
        return bool(span.flags & IS_REMOTE)
    return None


def _check_ids(span: OtlpSpan) -> None:
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        raise Refused(
            Reason.INCONSISTENT,
            f"span {span.name[:100]!r} has a trace id of {len(span.trace_id)} bytes and a span id of "
            f"{len(span.span_id)}: OTLP's are 16 and 8",
        )
    if span.parent_span_id and len(span.parent_span_id) != 8:
        raise Refused(
            Reason.INCONSISTENT,
            f"span {span.name[:100]!r} has a parent span id of {len(span.parent_span_id)} bytes: "
            "OTLP's are 8",
        )


def by_start(spans: list[OtlpSpan]) -> list[OtlpSpan]:
    """The order of a segment's spans: by start."""
    return sorted(spans, key=lambda s: (s.start_time_unix_nano, s.span_id))


def segment_object(trace_id: bytes, source: Source, ordered: list[OtlpSpan]) -> tracing_pb2.SegmentObject:
    """The SkyWalking segment of one trace's spans from ``source``, ``by_start``:
    each span points at its parent when the parent is among them; an entry
    span whose parent is elsewhere, or is an exit span of its own (a service
    that called itself), refers to it (with no names: its caller is found by
    ``Callers``)."""
    index = {s.span_id: i for i, s in enumerate(ordered)}
    segment = tracing_pb2.SegmentObject(
        traceId=trace_id.hex(),
        traceSegmentId=f"{trace_id.hex()}.{ordered[0].span_id.hex()}",
        service=source.service,
        serviceInstance=source.instance,
    )
    for i, s in enumerate(ordered):
        attrs = attributes(s.attributes)
        kind = KINDS.get(s.kind, SpanKind.LOCAL)
        span = segment.spans.add(
            spanId=i,
            parentSpanId=index.get(s.parent_span_id, -1),
            startTime=_ms(s.start_time_unix_nano),
            endTime=_ms(s.end_time_unix_nano),
            operationName=s.name,
            peer=peer_of(attrs) if kind == SpanKind.EXIT else "",
            spanType=int(kind),
            spanLayer=next((layer for key, layer in LAYERS if key in attrs), 0),
            isError=s.status.code == trace_pb2.Status.STATUS_CODE_ERROR,
            tags=[sw_common_pb2.KeyStringValuePair(key=k, value=v) for k, v in attrs.items()],
        )
        parent = index.get(s.parent_span_id)
        elsewhere = s.parent_span_id and parent is None and _remote_parent(s) is not False
        called_itself = parent is not None and KINDS.get(ordered[parent].kind) == SpanKind.EXIT
        if kind == SpanKind.ENTRY and (elsewhere or called_itself):
            span.refs.add(
                refType=tracing_pb2.CrossProcess,
                traceId=trace_id.hex(),
                networkAddressUsedAtPeer=_address(attrs, ("server.address",), ("server.port",)),
            )
    return segment


@dataclass(frozen=True, slots=True)
class Seen:
    """What a later span of another service needs to know of a span: whose it
    is, and how to find the entry it was made in (its name is guarded when it
    names one)."""

    service: str
    instance: str
    name: str
    kind: SpanKind
    parent: bytes
    """The parent span's id; empty for a root."""
    remote_parent: bool | None


@dataclass(frozen=True, slots=True)
class Served:
    """An entry span that waits for its caller: its parent span, and the call."""

    parent: bytes
    service: str
    instance: str
    endpoint: str
    call: Call
    deadline: float


MAX_DEPTH = 32
"""How many ancestors of a caller's span are followed to the entry it was made in."""


class Callers:
    """The callers of entry spans whose parent was in another process: recent
    spans by id (at most ``size``), and the entries that wait for their
    parent, at most ``wait_s`` and ``size`` of them. Each entry found its
    caller for is counted once (``Calls.served``), the relations it makes
    handed to ``take`` (kept for the next pass while the node has no room).
    ``endpoint`` guards a caller's endpoint name as the receiver's guards do."""

    def __init__(
        self,
        take: Callable[[list[Any]], None],
        endpoint: Callable[[str, str], str],
        instruments: Instruments,
        wait_s: float = 10.0,
        size: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._take = take
        self._endpoint = endpoint
        self.wait_s = wait_s
        self._size = size
        self._clock = clock
        self._seen: OrderedDict[bytes, Seen] = OrderedDict()
        self._waiting: list[Served] = []
        self._unsent: list[Any] = []
        self._lock = threading.Lock()
        self._task = Periodic(
            "otlp-callers", min(1.0, wait_s), self.settle, "finding the callers of OTLP spans"
        )
        self._unknown = instruments.counter(
            "skyoap_otlp_unknown_callers_total",
            "OTLP entry spans whose parent span did not arrive within --otlp-caller-wait-s "
            "(no relation counted)",
        )

    def add(self, service: str, instance: str, spans: Iterable[OtlpSpan]) -> None:
        """Spans of ``instance`` (as the guards left it) of ``service``."""
        with self._lock:
            for s in spans:
                kind = KINDS.get(s.kind, SpanKind.LOCAL)
                self._seen[s.span_id] = Seen(
                    service, instance, s.name, kind, s.parent_span_id, _remote_parent(s)
                )
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def wait(self, served: Iterable[tuple[bytes, str, str, str, Call]]) -> None:
        """Entries (parent span, service, instance, endpoint, call) whose caller is to be found."""
        deadline = self._clock() + self.wait_s
        with self._lock:
            for parent, service, instance, endpoint, call in served:
                if len(self._waiting) >= self._size:
                    self._unknown.inc()
                    continue
                self._waiting.append(Served(parent, service, instance, endpoint, call, deadline))

    def _entry_of(self, span_id: bytes, final: bool) -> str | None:
        """The endpoint a span was made in: the nearest entry among its
        ancestors of the same service, or its local root. None while an
        ancestor is missing, unless ``final`` (then the furthest one known)."""
        span = self._seen[span_id]
        for _ in range(MAX_DEPTH):
            if span.kind == SpanKind.ENTRY or not span.parent or span.remote_parent:
                break
            parent = self._seen.get(span.parent)
            if parent is None:
                return None if not final else self._endpoint(span.service, span.name)
            if parent.service != span.service:
                break
            span = parent
        return self._endpoint(span.service, span.name)

    def settle(self, final: bool = False) -> None:
        """Counts the calls whose caller is now known, and drops those that
        waited ``wait_s`` for it in vain (all that wait, if ``final``)."""
        now = self._clock()
        calls = Calls()
        with self._lock:
            waiting, self._waiting = self._waiting, []
            entries: dict[bytes, str | None] = {}  # each parent walked once a pass
            for w in waiting:
                ends = final or now >= w.deadline
                caller = self._seen.get(w.parent)
                if caller is not None and (w.parent not in entries or ends):
                    entries[w.parent] = self._entry_of(w.parent, ends)
                endpoint = entries.get(w.parent) if caller is not None else None
                if caller is not None and endpoint is not None:
                    # A call to its own service counts only when made by an exit span.
                    if caller.service != w.service or caller.kind == SpanKind.EXIT:
                        # OpenTelemetry spans name no component SkyWalking numbers: its Unknown (0).
                        calls.served(Caller(caller.service, caller.instance, endpoint), w.service, w.instance,
                                     w.endpoint, w.call.minute, w.call.sums(), 0)  # fmt: skip
                elif ends:
                    self._unknown.inc()
                else:
                    self._waiting.append(w)
            metrics, self._unsent = [*self._unsent, *calls.metrics()], []
        if metrics:
            try:
                self._take(metrics)
            except Overloaded:
                with self._lock:  # the next pass tries again
                    self._unsent = metrics + self._unsent
                raise

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops, counting what the entries waiting now found and dropping the rest (counted)."""
        self._task.close(timeout_s)
        try:
            self.settle(final=True)
        except Overloaded:
            log.warning("%d relation values of OTLP spans not handed on at close", len(self._unsent))


T = TypeVar("T")


class Export:
    """What one export call took and refused: each resource's items turned
    into what the node stores, or refused (counted in ``tally``)."""

    def __init__(self, refusals: Refusals, limits: TelemetryLimits, context: grpc.ServicerContext) -> None:
        self.tally = refusals.tally()
        self.rejected = 0
        """Items refused, for OTLP's partial success."""
        self.now_ms = clock.now_ms()
        self._limits = limits
        self._host = peer_host(context)

    def each(
        self,
        resources: Iterable[tuple[resource_pb2.Resource, list[Any]]],
        convert: Callable[[Source, Any], T],
    ) -> list[T]:
        """``convert(source, item)`` of every item of every resource: a
        resource that names no service is refused with all its items, an item
        that ``convert`` refuses alone."""
        taken: list[T] = []
        for resource, items in resources:
            try:
                source = source_of(resource, self._host, self._limits)
            except Refused as e:
                self.tally.refuse(e)
                self.rejected += len(items)
                continue
            for item in items:
                try:
                    taken.append(convert(source, item))
                except Refused as e:
                    self.tally.refuse(e)
                    self.rejected += 1
        return taken

    def partial(self, partial_success: Any, field: str) -> None:
        """Sets OTLP's partial success, when anything was refused: how many
        (in ``field``) and why the first was."""
        if self.rejected:
            setattr(partial_success, field, self.rejected)
            partial_success.error_message = self.tally.first or ""


class TraceService:
    """``opentelemetry.proto.collector.trace.v1.TraceService``."""

    def __init__(self, segments: SegmentIntake, callers: Callers, refusals: Refusals,
                 limits: TelemetryLimits) -> None:  # fmt: skip
        self._segments = segments
        self._callers = callers
        self._refusals = refusals
        self._limits = limits

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        export = Export(self._refusals, self._limits, context)

        def checked(source: Source, span: OtlpSpan) -> tuple[Source, OtlpSpan]:
            _check_ids(span)
            return source, span

        resources = [
            (r.resource, [s for scope in r.scope_spans for s in scope.spans]) for r in request.resource_spans
        ]
        groups: dict[tuple[bytes, Source], list[OtlpSpan]] = {}
        for source, span in export.each(resources, checked):
            groups.setdefault((span.trace_id, source), []).append(span)
        ordered = {key: by_start(spans) for key, spans in groups.items()}
        outcome = self._segments.take(
            (segment_object(*key, spans) for key, spans in ordered.items()), export.tally
        )
        for spans, (pb, segment) in zip(ordered.values(), outcome, strict=True):
            if segment is None:
                export.rejected += len(pb.spans)
                continue
            # The segment's names are those the node's guards left (grouped endpoints, bounded instances).
            service, instance = segment.service, segment.instance
            self._callers.add(service, instance, spans)
            self._callers.wait(
                (otlp.parent_span_id, service, instance, span.operation, Call.of(span))
                for otlp, span in zip(spans, segment.spans, strict=True)
                if span.refs and not span.skip_analysis
            )
        response = trace_service_pb2.ExportTraceServiceResponse()
        export.partial(response.partial_success, "rejected_spans")
        return response


def _labels(kvs: Iterable[common_pb2.KeyValue]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(attributes(kvs).items()))


class ItemsService:
    """What the metrics and logs services share: the checks and guards they
    apply, how they count refusals, and how they hand on what they take."""

    def __init__(
        self, names: NamesByService, sinks: Sinks, refusals: Refusals, limits: TelemetryLimits,
        cardinality: Cardinality,
    ) -> None:  # fmt: skip
        self._names = names
        self._sinks = sinks
        self._refusals = refusals
        self._limits = limits
        self._cardinality = cardinality

    def _hand_on(
        self,
        export: Export,
        records: Sequence[LogRecord],
        meters: Sequence[MeterMetrics],
        made: Sequence[Meter] = (),
    ) -> None:
        """Queues what an export took, all of it or nothing (Overloaded), and
        what the meter rules ``made`` of it, then registers the instances it
        came from."""
        taken = [*records, *meters]
        self._sinks.hold(memory_size([*taken, *made]))
        if taken or made:
            self._sinks.take(records, [*meters, *made])
            export.tally.taken += len(taken)
        for service, instance in sorted(
            {(r.service, r.instance) for r in records} | {(m.service, m.instance) for m in meters}
        ):
            self._names.seen(service, instance)


class MetricsService(ItemsService):
    """``opentelemetry.proto.collector.metrics.v1.MetricsService``: each data
    point of a gauge or a sum becomes a meter value, each of an explicit-bucket
    histogram a meter histogram (its buckets by lower bound, as SkyWalking's);
    exponential histograms and summaries are refused. Each meter is checked
    as the RemoteService checks it, and one whose sum with the others of its
    meter and minute in the same export would overflow is refused. Every
    point, of whatever kind, goes to the meter rules too (``otlp_samples.py``)."""

    def __init__(
        self, names: NamesByService, sinks: Sinks, refusals: Refusals, limits: TelemetryLimits,
        cardinality: Cardinality, meters: MeterAnalyzer,
    ) -> None:  # fmt: skip
        super().__init__(names, sinks, refusals, limits, cardinality)
        self._meters = meters

    def _number(self, common: dict[str, Any], point: metrics_pb2.NumberDataPoint) -> MeterMetrics:
        kind = point.WhichOneof("value")
        if kind is None:
            raise Refused(Reason.NO_VALUE, f"a data point of meter {common['name']} has no value")
        value = float(getattr(point, kind))
        if not math.isfinite(value):
            raise Refused(Reason.NOT_A_NUMBER, f"meter {common['name']} has the value {value}")
        return MeterMetrics(**common, value_sum=value, last_value=value, value_max=value, value_min=value)

    def _histogram(self, common: dict[str, Any], point: metrics_pb2.HistogramDataPoint) -> MeterMetrics:
        lim, name = self._limits, common["name"]
        counts, bounds = list(point.bucket_counts), list(point.explicit_bounds)
        lim.at_most(
            f"buckets of meter {name}", len(counts), lim.max_histogram_buckets, "--max-histogram-buckets"
        )
        if not counts:  # a count and a sum only: no buckets
            total = float(point.count)
            return MeterMetrics(**common, value_sum=total, last_value=total, value_max=total, value_min=total)
        if len(counts) != len(bounds) + 1:
            raise Refused(
                Reason.INCONSISTENT,
                f"histogram {name} has {len(counts)} bucket counts for {len(bounds)} bounds: "
                "OTLP sends one more",
            )
        if not all(math.isfinite(b) for b in bounds) or any(b >= c for b, c in itertools.pairwise(bounds)):
            raise Refused(Reason.INCONSISTENT, f"histogram {name} has bounds that are not finite and rising")
        lower = ["-inf", *(repr(b) for b in bounds)]
        total = float(sum(counts))
        return MeterMetrics(
            **common,
            value_sum=total,
            last_value=total,
            value_max=total,
            value_min=total,
            buckets={b: str(c) for b, c in zip(lower, counts, strict=True)},
        )

    def _meter(
        self,
        source: Source,
        metric: metrics_pb2.Metric,
        point: Any,
        now_ms: int,
        totals: dict[str, MeterMetrics],
    ) -> MeterMetrics:
        kind, lim = metric.WhichOneof("data"), self._limits
        if kind not in ("gauge", "sum", "histogram"):
            raise Refused(
                Reason.NO_VALUE,
                f"meter {metric.name[:100]!r} is an {kind}: skyoap takes gauges, sums and histograms "
                "with explicit buckets",
            )
        timestamp = _ms(point.time_unix_nano) or now_ms
        common: dict[str, Any] = {
            "time_bucket": minute_bucket(lim.time("time_unix_nano", timestamp, now_ms)),
            "service": source.service,
            "instance": source.instance,
            "name": lim.name("meter name", metric.name),
            "labels": lim.name("meter labels", _labels(point.attributes), required=False),
            "samples": 1,
            "last_time": timestamp,
        }
        meter = self._histogram(common, point) if kind == "histogram" else self._number(common, point)
        meter.check(lim, now_ms)
        add_to(totals, meter)
        # Guarded once every check passed: a refused point counts against no bound.
        service, instance = self._cardinality.source(source.service, source.instance)
        if (service, instance) == (source.service, source.instance):
            return meter
        return replace(meter, service=service, instance=instance)

    def Export(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        export = Export(self._refusals, self._limits, context)
        resources = [
            (r.resource, [(m, p) for scope in r.scope_metrics for m in scope.metrics for p in _points(m)])
            for r in request.resource_metrics
        ]
        totals: dict[str, MeterMetrics] = {}
        taken = export.each(
            resources, lambda source, mp: self._meter(source, mp[0], mp[1], export.now_ms, totals)
        )
        batches = otlp_samples.batches(request, self._meters.families)
        made = [m for batch in batches for m in self._meters.analyze(batch, export.now_ms)]
        self._hand_on(export, (), taken, made)
        response = metrics_service_pb2.ExportMetricsServiceResponse()
        export.partial(response.partial_success, "rejected_data_points")
        return response


class LogsService(ItemsService):
    """``opentelemetry.proto.collector.logs.v1.LogsService``: each log record
    becomes a log line of its resource's service and instance, with its trace
    and span ids (hex), its severity and attributes as tags, those of the
    ``searchable`` keys kept for searches."""

    def __init__(
        self, names: NamesByService, sinks: Sinks, refusals: Refusals, limits: TelemetryLimits,
        cardinality: Cardinality, searchable: frozenset[str],
    ) -> None:  # fmt: skip
        super().__init__(names, sinks, refusals, limits, cardinality)
        self._searchable = searchable

    def _record(self, source: Source, pb: logs_pb2.LogRecord, now_ms: int) -> LogRecord:
        lim = self._limits
        timestamp = _ms(pb.time_unix_nano or pb.observed_time_unix_nano) or now_ms
        lim.time("time_unix_nano", timestamp, now_ms)
        if len(pb.trace_id) not in (0, 16) or len(pb.span_id) not in (0, 8):
            raise Refused(
                Reason.INCONSISTENT,
                f"a log record has a trace id of {len(pb.trace_id)} bytes and a span id of "
                f"{len(pb.span_id)}: OTLP's are 16 and 8 (or none)",
            )
        tags = attributes(pb.attributes)
        if pb.severity_text:
            tags["level"] = pb.severity_text
        if pb.span_id:
            tags["span_id"] = pb.span_id.hex()
        lim.at_most("attributes of a log record", len(tags), lim.max_tags_per_item, "--max-tags-per-item")
        body = text_of(pb.body) if pb.HasField("body") else ""
        lim.at_most("bytes of a log body", len(body.encode()), lim.max_log_body_bytes, "--max-log-body-bytes")
        return log_record(
            self._cardinality,
            self._searchable,
            timestamp=timestamp,
            service=source.service,
            instance=source.instance,
            tags=list(tags.items()),
            content_type="text" if pb.body.WhichOneof("value") in (None, "string_value") else "json",
            content=body,
            trace_id=pb.trace_id.hex(),
        )

    def Export(
        self, request: logs_service_pb2.ExportLogsServiceRequest, context: grpc.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        export = Export(self._refusals, self._limits, context)
        resources = [
            (r.resource, [pb for scope in r.scope_logs for pb in scope.log_records])
            for r in request.resource_logs
        ]
        records = export.each(resources, lambda source, pb: self._record(source, pb, export.now_ms))
        self._hand_on(export, records, ())
        response = logs_service_pb2.ExportLogsServiceResponse()
        export.partial(response.partial_success, "rejected_log_records")
        return response


def _points(metric: metrics_pb2.Metric) -> list[Any]:
    kind = metric.WhichOneof("data")
    return [] if kind is None else list(getattr(metric, kind).data_points)


def add_otlp_services(
    server: GrpcServer, segments: SegmentIntake, intake: Intake, caller_wait_s: float
) -> Callers:
    """Serves OTLP's trace, metrics and logs services on ``server``, taking
    what they carry into ``intake`` (spans through ``segments``); returns the
    callers of entry spans, which the caller starts and closes."""
    names, sinks, limits, guards, instruments = (
        intake.names, intake.sinks, intake.limits, intake.cardinality, intake.instruments
    )  # fmt: skip
    callers = Callers(
        lambda metrics: sinks.take((), metrics),
        lambda service, name: guards.endpoint(service, name, seed=False),  # under Callers' lock
        instruments,
        caller_wait_s,
    )
    services = [
        (trace_service_pb2, "TraceService",
         TraceService(segments, callers, Refusals("otlp_spans", instruments), limits)),
        (metrics_service_pb2, "MetricsService",
         MetricsService(names, sinks, Refusals("otlp_data_points", instruments), limits, guards,
                        intake.meters)),
        (logs_service_pb2, "LogsService",
         LogsService(names, sinks, Refusals("otlp_log_records", instruments), limits, guards,
                     intake.log_tags)),
    ]  # fmt: skip
    for module, name, servicer in services:
        server.add(module.DESCRIPTOR.services_by_name[name], servicer)
    return callers
