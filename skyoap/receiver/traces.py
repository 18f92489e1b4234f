"""The traces every protocol hands in, as SkyWalking's segment objects (OTLP's
spans become them first): each read into ``model.spans``' segment, by the
accelerator where it is built and by protobuf otherwise, checked, guarded,
held in the budget, measured and stored, and its names registered."""

from __future__ import annotations

from collections.abc import Iterable

from skyoap.edge.decoding import DecodeCost
from skyoap.layers.spans import DEFAULT_SLOW, SlowThresholds
from skyoap.model.checks import Refused
from skyoap.model.metrics import ApdexThresholds
from skyoap.model.spans import (
    DETAIL_KEYS,
    ENTRY,
    EXIT,
    SEARCHABLE_TRACE_TAGS,
    Segment,
    SegmentRules,
    Span,
    SpanRef,
    searchable_tags,
)
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver import accelerator
from skyoap.receiver.checks import Tally
from skyoap.receiver.intake import Intake, TelemetryService
from skyoap.receiver.sampling import Sampler
from skyoap.receiver.segments import DEFAULT_APDEX, Aliases, analyse, record_of
from skyoap.runtime import clock

_SEGMENT_COST = DecodeCost(tracing_pb2.SegmentObject)
HOLD_EVERY = 64
"""A call's segments are held in the budget this many at a time (and the
rest when its stream ends): one reservation each would cost more than the
segment. Counted over their bytes joined, a tag that spans two segments
counts once more, which only errs high."""


def segment_of(pb: tracing_pb2.SegmentObject, rules: SegmentRules | None = None) -> Segment:
    """The segment ``pb`` carries, with its tags whose keys are searchable
    (``rules.searchable``, SkyWalking's defaults without rules). With
    ``rules``, a segment of more spans, or a span of more references, than
    they allow is refused before they become objects.

    One pass over the spans reads each field once: every read of a decoded
    message's field makes a Python object, and this runs for every span."""
    if rules:
        rules.at_most_spans(pb.traceSegmentId, len(pb.spans))
    read = []
    pairs: list[tuple[str, str]] = []
    for s in pb.spans:
        given, tags = s.refs, s.tags
        details: tuple[tuple[str, str], ...] = ()
        if tags:
            mine = [(t.key, t.value) for t in tags]
            pairs += mine
            details = tuple([pair for pair in mine if pair[0] in _DETAIL_KEYS])
        refs: tuple[SpanRef, ...] = ()
        if given:
            if rules:
                rules.at_most_refs(pb.traceSegmentId, len(given))
            refs = tuple([
                _new(SpanRef, (r.refType, r.parentService, r.parentServiceInstance, r.parentEndpoint,
                               r.networkAddressUsedAtPeer))
                for r in given
            ])  # fmt: skip
        read.append(
            _new(Span, (s.spanType, s.spanLayer, s.startTime, s.endTime, s.operationName, s.peer, s.isError,
                        s.skipAnalysis, refs, len(tags), s.componentId, details))
        )  # fmt: skip
    return Segment(
        trace_id=pb.traceId,
        segment_id=pb.traceSegmentId,
        service=pb.service,
        instance=pb.serviceInstance,
        spans=tuple(read),
        data=pb.SerializeToString(),
        tags=searchable_tags(pairs, rules.searchable if rules else _SEARCHABLE) if pairs else (),
    )


def checked_segment(pb: tracing_pb2.SegmentObject, rules: SegmentRules, now_ms: int) -> Segment:
    """``segment_of`` the message, checked (Refused if it breaks a rule).

    Where the accelerator is built, the segment is read from its bytes by
    ``accelerator.scanner`` without reading the message's fields one object
    at a time; a segment it does not take (one that breaks a rule, or holds
    what only protobuf reads) is read here, which says what was wrong."""
    if accelerator.scanner is not None:
        data = pb.SerializeToString()
        fields = accelerator.scanner.scan(data, rules.scan_args, now_ms)
        if fields is not None:
            trace_id, segment_id, service, instance, taken, tags = fields
            return Segment(trace_id, segment_id, service, instance, taken, data, tags)
    segment = segment_of(pb, rules)
    rules.check(segment, now_ms)
    return segment


_DETAIL_KEYS = frozenset(DETAIL_KEYS)
_SEARCHABLE = frozenset(SEARCHABLE_TRACE_TAGS)

_new = tuple.__new__
"""Builds a named tuple from a tuple of its fields, without the call its
constructor makes to do the same."""


class SegmentIntake(TelemetryService):
    """Takes segments: registers the names in them (the service and instance,
    the endpoints entry spans serve, the peers exit spans call), stores each as
    a record, and measures its spans' calls (each service's apdex by its
    threshold in ``apdex``, exit spans through the node's ``aliases``), its
    tags of the ``searchable`` keys kept for searches."""

    KIND = "segments"

    def __init__(
        self,
        intake: Intake,
        aliases: Aliases | None = None,
        apdex: ApdexThresholds = DEFAULT_APDEX,
        searchable: frozenset[str] = frozenset(SEARCHABLE_TRACE_TAGS),
        slow: SlowThresholds = DEFAULT_SLOW,
        sampler: Sampler | None = None,
    ) -> None:
        super().__init__(intake)
        self._aliases = aliases
        self._apdex = apdex
        self._slow = slow
        self._sampler = sampler
        self._rules = SegmentRules(self._limits, searchable)

    def take(
        self, segments: Iterable[tracing_pb2.SegmentObject], tally: Tally
    ) -> list[tuple[tracing_pb2.SegmentObject, Segment | None]]:
        """Takes the good segments of one call, all at once: their records and
        metrics are queued together (or the call is refused whole, raising
        Overloaded), then the names in them are registered. Returns each
        segment with what was taken of it, None for one refused (counted in
        ``tally``)."""
        now_ms = clock.now_ms()
        outcome: list[tuple[tracing_pb2.SegmentObject, Segment | None]] = []
        unheld: list[bytes] = []
        try:
            for pb in segments:
                try:
                    segment = checked_segment(pb, self._rules, now_ms)
                except Refused as e:
                    tally.refuse(e)
                    outcome.append((pb, None))
                    continue
                segment = self._cardinality.segment(segment)
                outcome.append((pb, segment))
                unheld.append(segment.data)
                if len(unheld) == HOLD_EVERY:
                    self._hold(unheld)
            self._hold(unheld)
        finally:
            self._received.inc(len(outcome))
        taken = [s for _, s in outcome if s is not None]
        if taken:
            metrics, samples = analyse(taken, self._apdex, self._aliases, self._slow)
            records = list(map(record_of, taken))
            if self._sampler is not None:
                records = self._sampler.kept(records)
            self._sinks.take([*records, *samples], metrics)
            tally.taken += len(taken)
            self._register_names(taken)
        return outcome

    def _hold(self, unheld: list[bytes]) -> None:
        """Holds what the segments of ``unheld`` became, about what their
        decoded messages do, in the budget (Overloaded if no room comes)."""
        if unheld:
            self._sinks.hold(_SEGMENT_COST.of(b"".join(unheld)))
            unheld.clear()

    def _register_names(self, segments: list[Segment]) -> None:
        instances: set[tuple[str, str]] = set()
        endpoints: dict[str, set[str]] = {}
        peers: set[str] = set()
        for segment in segments:
            instances.add((segment.service, segment.instance))
            for span in segment.spans:
                if span.kind == ENTRY and span.operation:
                    endpoints.setdefault(segment.service, set()).add(span.operation)
                elif span.kind == EXIT and span.peer:
                    peers.add(span.peer)
                if span.refs:
                    peers.update([r.address for r in span.refs if r.address])
        for service, instance in sorted(instances):
            self._names.seen(service, instance)
        for service, names in endpoints.items():
            self._names.endpoints(service, names)
        if peers:
            self._names.addresses(sorted(peers))
