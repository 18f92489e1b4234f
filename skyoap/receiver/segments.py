"""Trace segments as the receiver reads them, and what it derives from each:
the segment record, and one call per entry span for its service, instance,
endpoint and the relations to its caller (service, instance and endpoint),
one per exit span for the relations to the peer it called (service and
instance), and the network address aliases entry spans show (SkyWalking's
multi-scope span analysis); and, through ``virtual``, one per span to a
database or a cache for it, with its slow calls sampled."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from skyoap.layers.spans import DEFAULT_SLOW, SlowThresholds
from skyoap.model import sketch
from skyoap.model.inventory import OTHER, DetectPoint
from skyoap.model.metrics import (
    ApdexThresholds,
    CacheAccessMetrics,
    CallMetrics,
    DatabaseAccessMetrics,
    EndpointMetrics,
    EndpointRelationMetrics,
    Metrics,
    MQAccessMetrics,
    MQEndpointAccessMetrics,
    NetworkAddressAlias,
    ServiceInstanceMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.model.records import SampledRecord, SegmentRecord
from skyoap.model.spans import CROSS_PROCESS, ENTRY, EXIT, Segment, Span, SpanLayer, SpanRef
from skyoap.model.stream import Text
from skyoap.receiver import virtual

DEFAULT_APDEX = ApdexThresholds()

USER = "User"
"""The caller of an entry span no other traced service called (SkyWalking's name)."""


SERVER, CLIENT = DetectPoint.SERVER.value, DetectPoint.CLIENT.value


def record_of(segment: Segment) -> SegmentRecord:
    spans = segment.spans
    entry = spans[0]
    if entry.kind != ENTRY:
        entry = next((s for s in spans if s.kind == ENTRY), entry)
    # Lists rather than generators: five spans are read faster that way.
    start = min([s.start_time for s in spans])
    end = max([s.end_time for s in spans])
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
        is_error=any([s.is_error for s in spans]),
        spans=len(spans),
        data=Text(base64.b64encode(segment.data).decode()),
        tags=segment.tags,
    )


class Caller(NamedTuple):
    """Where a call came from: the caller's service, instance and the endpoint
    (its entry) the call was made in."""

    service: str
    instance: str
    endpoint: str
    endpoint_service: str = ""
    """The service of ``endpoint`` when it is not ``service``: a message's
    producer, whose broker is the consumer's caller."""


class Call(NamedTuple):
    """One span's call: its minute, latency, whether it failed, and its
    latency's bucket in the sketch."""

    minute: int
    latency: int
    error: bool
    slot: int

    @classmethod
    def of(cls, span: Span) -> Call:
        latency = span.end_time - span.start_time
        return cls(minute_bucket(span.start_time), latency, span.is_error, sketch.bucket_of(latency))

    def sums(self) -> Sums:
        return [1, int(self.error), self.latency, {self.slot: 1}, 0, 0]


Sums = list[Any]
"""What calls add up to: [calls, errors, latency sum, {histogram bucket: calls},
apdex satisfied, apdex tolerating]."""


def _add(into: Sums, sums: Sums) -> None:
    into[0] += sums[0]
    into[1] += sums[1]
    into[2] += sums[2]
    histogram = into[3]
    for slot, n in sums[3].items():
        histogram[slot] = histogram.get(slot, 0) + n
    into[4] += sums[4]
    into[5] += sums[5]


class Calls:
    """Calls summed per scope, entity and minute: one metric value per key
    rather than one per span and scope, so that L1 starts from the sums of a
    whole chunk."""

    def __init__(self) -> None:
        self._sums: dict[_Key, Sums] = {}
        self._components: dict[_Key, set[int]] = {}

    def count(self, model: type[CallMetrics], names: tuple[str, ...], minute: int, sums: Sums) -> None:
        key = (model, names, minute)
        held = self._sums.get(key)
        if held is None:
            self._sums[key] = [*sums[:3], dict(sums[3]), *sums[4:]]
        else:
            _add(held, sums)

    def relate(self, names: tuple[str, str, str], minute: int, sums: Sums, component: int) -> None:
        """Counts calls of ``sums`` between two services, made by ``component``."""
        self.count(ServiceRelationMetrics, names, minute, sums)
        self._components.setdefault((ServiceRelationMetrics, names, minute), set()).add(component)

    def served(
        self,
        caller: Caller,
        service: str,
        instance: str,
        endpoint: str,
        minute: int,
        sums: Sums,
        component: int,
    ) -> None:
        """``endpoint`` of ``instance`` of ``service`` served calls of
        ``sums`` from ``caller`` through ``component``: the relations the
        callee sees (server side)."""
        self.relate((caller.service, service, SERVER), minute, sums, component)
        if caller.instance:
            instances = (caller.service, caller.instance, service, instance, SERVER)
            self.count(ServiceInstanceRelationMetrics, instances, minute, sums)
        if caller.endpoint and endpoint:
            endpoints = (caller.endpoint_service or caller.service, caller.endpoint, service, endpoint)
            self.count(EndpointRelationMetrics, endpoints, minute, sums)

    def called(
        self,
        service: str,
        instance: str,
        peer: str,
        alias: NetworkAddressAlias | None,
        minute: int,
        sums: Sums,
        component: int,
    ) -> None:
        """``instance`` of ``service`` made calls of ``sums`` to the address
        ``peer`` through ``component``: the relations the caller sees (client
        side), to the service and instance ``alias`` names, else to the
        address as a service and an instance of its own (what SkyWalking draws
        as a conjectured node)."""
        dest, dest_instance = (alias.service, alias.instance) if alias is not None else (peer, peer)
        self.relate((service, dest, CLIENT), minute, sums, component)
        names = (service, instance, dest, dest_instance, CLIENT)
        self.count(ServiceInstanceRelationMetrics, names, minute, sums)

    def metrics(self) -> list[CallMetrics]:
        found: list[CallMetrics] = []
        for key, (calls, errors, latency_sum, histogram, satisfied, tolerating) in self._sums.items():
            model, names, minute = key
            extra: dict[str, Any] = dict(zip(ENTITY_FIELDS[model], names, strict=True))
            if model is ServiceMetrics:
                extra.update(apdex_satisfied=satisfied, apdex_tolerating=tolerating)
            elif model is ServiceRelationMetrics:
                extra.update(components=tuple(sorted(self._components[key])))
            found.append(
                model(
                    time_bucket=minute,
                    calls=calls,
                    errors=errors,
                    latency_sum_ms=latency_sum,
                    histogram=sketch.of_counts(histogram),
                    **extra,
                )
            )
        return found


_Key = tuple[type[CallMetrics], tuple[str, ...], int]
"""A metric's model, entity names and minute bucket."""


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
    return _aliases(_summed(list(segments), DEFAULT_APDEX).seen)


_Sighting = tuple[int, str, str]
"""When an address was last seen as an alias, and of which service and instance."""


def _sight(seen: dict[tuple[str, int], _Sighting], span: Span, service: str, instance: str) -> None:
    """Adds the aliases entry ``span`` of ``instance`` of ``service`` shows to ``seen``."""
    for ref in span.refs:
        address = ref.address
        if ref.ref_type != CROSS_PROCESS or not address or address == OTHER:
            continue
        key = (address, span.start_time // 60_000)
        sighting = (span.start_time, service, instance)
        held = seen.get(key)
        if held is None or held < sighting:
            seen[key] = sighting


def _aliases(seen: dict[tuple[str, int], _Sighting]) -> list[NetworkAddressAlias]:
    return [
        NetworkAddressAlias(
            time_bucket=minute_bucket(minute * 60_000),
            address=address,
            service=service,
            instance=instance,
            last_seen=last_seen,
        )
        for (address, minute), (last_seen, service, instance) in seen.items()
    ]


def measure(
    segments: list[Segment], apdex: ApdexThresholds = DEFAULT_APDEX, aliases: Aliases | None = None
) -> list[Metrics]:
    """The metrics of ``analyse``."""
    return analyse(segments, apdex, aliases).metrics


class Analysed(NamedTuple):
    metrics: list[Metrics]
    samples: list[SampledRecord]
    """The slow calls to databases and caches (``virtual.samples``)."""


def analyse(
    segments: list[Segment],
    apdex: ApdexThresholds = DEFAULT_APDEX,
    aliases: Aliases | None = None,
    slow: SlowThresholds = DEFAULT_SLOW,
) -> Analysed:
    """What the spans of ``segments`` count for: each entry span one call for
    its service, instance and endpoint and one for each caller its references
    name (a ``User`` call if it has none), each exit span one for the
    relations to the peer it called, measured through ``aliases`` (those of
    the segments alone without it); and the aliases the entry spans show
    (``sightings``). Those are learned before any exit span is measured, so
    that a caller's and a callee's segments taken together count one
    relation from the first call. An entry whose references name no service
    (its caller is not known yet) counts no relation. A span to a database
    or a cache counts for it too, and is sampled if ``slow`` (``virtual``).

    Spans are summed first by what they count for (an entry's service,
    instance, endpoint, callers and minute; an exit's service, instance,
    peer and minute), and each sum is then counted once for every metric it
    makes: a chunk's spans share few of those."""
    known = CallAliases() if aliases is None else aliases
    entries, exits, sighted, called = _summed(segments, apdex)
    seen = _aliases(sighted)
    if seen:
        known.learn(seen)
    calls = Calls()
    for (service, instance, endpoint, callers, minute, component), sums in entries.items():
        bucket = minute_bucket(minute * 60_000)
        calls.count(ServiceMetrics, (service,), bucket, sums)
        calls.count(ServiceInstanceMetrics, (service, instance), bucket, sums)
        if endpoint:
            calls.count(EndpointMetrics, (service, endpoint), bucket, sums)
        for caller in callers:
            calls.served(caller, service, instance, endpoint, bucket, sums, component)
    for (service, instance, peer, minute, component), sums in exits.items():
        bucket = minute_bucket(minute * 60_000)
        calls.called(service, instance, peer, known.get(peer), bucket, sums, component)
    samples: list[SampledRecord] = []
    if called:
        accessed, samples = virtual.measure(called, slow)
        for (model, names, minute), sums in accessed.items():
            calls.count(model, names, minute_bucket(minute * 60_000), sums)
    return Analysed([*calls.metrics(), *seen], samples)


_Entry = tuple[str, str, str, tuple[Caller, ...], int, int]
"""An entry span's service, instance, endpoint, callers, minute (ms // 60,000) and component."""
_Exit = tuple[str, str, str, int, int]
"""An exit span's service, instance, peer, minute and component."""


class _Summed(NamedTuple):
    entries: dict[_Entry, Sums]
    exits: dict[_Exit, Sums]
    seen: dict[tuple[str, int], _Sighting]
    """The aliases entry spans show, by address and minute."""
    called: list[tuple[Segment, Span]]
    """The spans to databases and caches, with their segments."""


def _summed(segments: list[Segment], apdex: ApdexThresholds) -> _Summed:
    """The analysed spans of ``segments`` summed by what they count for."""
    entries: dict[_Entry, Sums] = {}
    exits: dict[_Exit, Sums] = {}
    seen: dict[tuple[str, int], _Sighting] = {}
    called: list[tuple[Segment, Span]] = []
    thresholds: dict[str, int] = {}
    for segment in segments:
        service, instance = segment.service, segment.instance
        for span in segment.spans:
            if span.skip_analysis:
                continue
            if span.layer in _VIRTUAL:
                called.append((segment, span))
            latency = span.end_time - span.start_time
            if span.kind == ENTRY:
                minute = span.start_time // 60_000
                queue = span.layer == _MQ
                callers = _callers(span.refs) if not queue else _queue_callers(span)
                entry = (service, instance, span.operation, callers, minute, span.component)
                sums = entries.get(entry)
                if sums is None:
                    sums = entries[entry] = [0, 0, 0, {}, 0, 0]
                if span.refs and not queue:
                    _sight(seen, span, service, instance)
                if not span.is_error:
                    threshold = thresholds.get(service)
                    if threshold is None:
                        threshold = thresholds[service] = apdex.of(service)
                    if latency <= threshold:
                        sums[4] += 1
                    elif latency <= 4 * threshold:
                        sums[5] += 1
            elif span.kind == EXIT and span.peer:
                exit = (service, instance, span.peer, span.start_time // 60_000, span.component)
                sums = exits.get(exit)
                if sums is None:
                    sums = exits[exit] = [0, 0, 0, {}, 0, 0]
            else:
                continue
            sums[0] += 1
            sums[1] += span.is_error
            sums[2] += latency
            slot = sketch.bucket_of(latency)
            sums[3][slot] = sums[3].get(slot, 0) + 1
    return _Summed(entries, exits, seen, called)


_VIRTUAL = virtual.SPAN_LAYERS


_USER_CALLER = (Caller(USER, USER, USER),)
"""The caller of an entry span no traced service called: SkyWalking's
``User`` service, with an instance and an endpoint of that name, so that
the callee's instance and endpoint have a caller in their topologies too."""


def _callers(refs: tuple[SpanRef, ...]) -> tuple[Caller, ...]:
    """The callers an entry span's references name, each once: ``User`` when
    none is cross-process, none when those name no service."""
    if not refs:
        return _USER_CALLER
    if not any(r.ref_type == CROSS_PROCESS for r in refs):
        return _USER_CALLER
    return tuple(
        dict.fromkeys(
            Caller(r.parent_service, r.parent_instance, r.parent_endpoint)
            for r in refs
            if r.ref_type == CROSS_PROCESS and r.parent_service
        )
    )


def _queue_callers(span: Span) -> tuple[Caller, ...]:
    """The callers of an entry span of the MQ layer, as SkyWalking names
    them: the broker (the address its reference names, else its peer), not
    the producer, whose endpoint stays the caller of the consumer's."""
    refs = [r for r in span.refs if r.ref_type == CROSS_PROCESS]
    if not refs:
        return (Caller(span.peer, span.peer, ""),) if span.peer.strip() else _USER_CALLER
    return tuple(
        dict.fromkeys(
            Caller(r.address, r.address, r.parent_endpoint, r.parent_service)
            if r.address.strip()
            else Caller(r.parent_service, r.parent_instance, r.parent_endpoint)
            for r in refs
            if r.parent_service
        )
    )


_MQ = int(SpanLayer.MQ)

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
    DatabaseAccessMetrics: ("service", "type"),
    CacheAccessMetrics: ("service", "operation"),
    MQAccessMetrics: ("service", "operation"),
    MQEndpointAccessMetrics: ("service", "endpoint", "operation"),
}
