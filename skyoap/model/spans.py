"""A trace segment as the receiver analyses it, whichever protocol brought it:
its spans and their references, the kinds, layers and reference types of
SkyWalking's protocol (with the names its query protocol answers), the tags
spans are searched and measured by, and the one set of rules a segment is
checked by (``SegmentRules``). The rules are applied here to a segment
protobuf read, and handed to the receiver's accelerator
(``receiver/accelerator.py``), which applies the same to a segment's bytes
with the constants of this module."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from skyoap.model.checks import CONTROL_CHARACTERS, Reason, Refused, TelemetryLimits


class _ProtocolEnum(enum.IntEnum):
    @property
    def label(self) -> str:
        """Its name in the query protocol."""
        return _OWN_LABELS.get(self.name, self.name.title())

    @classmethod
    def label_of(cls, value: int) -> str:
        """The query protocol's name of ``value``; the first member's for a
        value it does not know."""
        labels = _LABELS[cls]
        return labels[value] if 0 <= value < len(labels) else labels[0]


class SpanKind(_ProtocolEnum):
    """The protocol's ``SpanType``."""

    ENTRY = 0
    EXIT = 1
    LOCAL = 2


class SpanLayer(_ProtocolEnum):
    """The protocol's ``SpanLayer``."""

    UNKNOWN = 0
    DATABASE = 1
    RPC_FRAMEWORK = 2
    HTTP = 3
    MQ = 4
    CACHE = 5
    FAAS = 6


class RefType(_ProtocolEnum):
    """The protocol's ``RefType``."""

    CROSS_PROCESS = 0
    CROSS_THREAD = 1


_OWN_LABELS = {
    "RPC_FRAMEWORK": "RPCFramework", "MQ": "MQ", "FAAS": "FAAS",
    "CROSS_PROCESS": "CROSS_PROCESS", "CROSS_THREAD": "CROSS_THREAD",
}  # fmt: skip
"""The names the query protocol spells otherwise than title case."""
_LABELS: dict[type[_ProtocolEnum], tuple[str, ...]] = {
    kind: tuple(member.label for member in kind) for kind in (SpanKind, SpanLayer, RefType)
}
"""Each enum's names by value (each runs from 0, as the accelerator takes them)."""


ENTRY, EXIT = SpanKind.ENTRY, SpanKind.EXIT
"""The members hot loops compare with: a module's name is found faster than
an enum class's attribute."""
CROSS_PROCESS = int(RefType.CROSS_PROCESS)


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
    component: int = 0
    """The library that made the span, by SkyWalking's id (``Flask``: 7001)."""
    details: tuple[tuple[str, str], ...] = ()
    """Its tags of ``DETAIL_KEYS``, in their order: what a database, cache or
    queue it called is measured by."""


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

DETAIL_KEYS = (
    "db.type",
    "db.statement",
    "cache.type",
    "cache.op",
    "cache.cmd",
    "cache.key",
    "mq.topic",
    "mq.queue",
    "transmission.latency",
)
"""The tags (SkyWalking's names) spans keep for their analysis (``Span.details``)."""

SEARCHABLE_LOG_TAGS = ("level", "http.status_code")
"""SkyWalking's default ``searchableLogsTags``: the tags log lines are found by."""

MAX_SEARCHABLE_TAG_CHARS = 256
"""The longest ``key=value`` kept searchable; a longer one (a whole URL, a
statement) stays in the segment's data but is not searched by."""


def searchable_tags(pairs: Iterable[tuple[str, str]], keys: frozenset[str]) -> tuple[str, ...]:
    """The ``key=value`` of the ``pairs`` whose key is one of ``keys``, distinct and sorted."""
    found = {f"{k}={v}" for k, v in pairs if k in keys}
    return tuple(sorted(t for t in found if len(t) <= MAX_SEARCHABLE_TAG_CHARS))


_KINDS = frozenset(SpanKind)
_LAYERS = frozenset(SpanLayer)
_REF_TYPES = frozenset(RefType)


@dataclass(frozen=True)
class SegmentRules:
    """What a segment must be to be analysed: the node's ``limits`` on its
    spans, references, tags, names and times, the known kinds, layers and
    reference types, and names free of control characters; with the tags
    kept ``searchable``."""

    limits: TelemetryLimits
    searchable: frozenset[str] = frozenset(SEARCHABLE_TRACE_TAGS)
    scan_args: tuple[Any, ...] = field(init=False, repr=False, compare=False)
    """The same rules as the accelerator's ``scan`` takes them."""

    def __post_init__(self) -> None:
        limits = self.limits
        scan_args = (
            limits.max_spans_per_segment,
            limits.max_refs_per_span,
            limits.max_tags_per_item,
            limits.max_name_length,
            limits.max_past_ms,
            limits.max_future_ms,
            tuple(k.encode() for k in self.searchable),
            tuple(k.encode() for k in DETAIL_KEYS),
        )
        object.__setattr__(self, "scan_args", scan_args)

    def check(self, segment: Segment, now_ms: int) -> None:
        """Raises Refused if the segment cannot be analysed as it is."""
        if not self._passes(segment, now_ms):
            self._refuse(segment, now_ms)

    def at_most_spans(self, segment_id: str, count: int) -> None:
        limits = self.limits
        if count > limits.max_spans_per_segment:
            what = f"spans of segment {segment_id[:100]}"
            limits.at_most(what, count, limits.max_spans_per_segment, "--max-spans-per-segment")

    def at_most_refs(self, segment_id: str, count: int) -> None:
        limits = self.limits
        if count > limits.max_refs_per_span:
            what = f"references of a span of segment {segment_id[:100]}"
            limits.at_most(what, count, limits.max_refs_per_span, "--max-refs-per-span")

    def _passes(self, segment: Segment, now_ms: int) -> bool:
        """Whether every rule of ``_refuse`` holds, judged at once: one pass
        over the spans, one search of all names for a control character."""
        limits = self.limits
        spans = segment.spans
        if not spans or len(spans) > limits.max_spans_per_segment:
            return False
        names = [segment.trace_id, segment.segment_id, segment.service, segment.instance]
        if not all(names):
            return False
        earliest, latest = now_ms - limits.max_past_ms, now_ms + limits.max_future_ms
        for span in spans:
            if (
                span.kind not in _KINDS
                or span.layer not in _LAYERS
                or not earliest <= span.start_time <= span.end_time <= latest
                or len(span.refs) > limits.max_refs_per_span
                or span.tags > limits.max_tags_per_item
            ):
                return False
            names += (span.operation, span.peer)
            for ref in span.refs:
                if ref.ref_type not in _REF_TYPES:
                    return False
                names += ref[1:]
        too_long = max(map(len, names)) > limits.max_name_length
        return not too_long and not CONTROL_CHARACTERS.search("".join(names))

    def _refuse(self, segment: Segment, now_ms: int) -> None:
        """Raises the first rule the segment breaks, saying where."""
        limits = self.limits
        limits.name("traceId", segment.trace_id)
        limits.name("traceSegmentId", segment.segment_id)
        limits.name("service", segment.service)
        limits.name("serviceInstance", segment.instance)
        if not segment.spans:
            raise Refused(Reason.NO_SPANS, f"segment {segment.segment_id} has no spans")
        self.at_most_spans(segment.segment_id, len(segment.spans))
        for span in segment.spans:
            if span.kind not in _KINDS:
                raise Refused(Reason.UNKNOWN_ENUM, f"spanType {span.kind} is not one of Entry, Exit, Local")
            if span.layer not in _LAYERS:
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
            self.at_most_refs(segment.segment_id, len(span.refs))
            limits.at_most(
                f"tags of a span of segment {segment.segment_id}",
                span.tags,
                limits.max_tags_per_item,
                "--max-tags-per-item",
            )
            for ref in span.refs:
                if ref.ref_type not in _REF_TYPES:
                    raise Refused(
                        Reason.UNKNOWN_ENUM, f"refType {ref.ref_type} is not CrossProcess or CrossThread"
                    )
                limits.name("parentService", ref.parent_service, required=False)
                limits.name("parentServiceInstance", ref.parent_instance, required=False)
                limits.name("parentEndpoint", ref.parent_endpoint, required=False)
                limits.name("networkAddressUsedAtPeer", ref.address, required=False)
