"""A stored segment read back: ``SegmentRecord.data`` is the agent's
``SegmentObject`` as it was sent (protobuf, base64), read here with the
generated classes into the query side's span model. This module is the one
place past the gRPC edges that imports them, declared as such in the import
contract (``pyproject.toml``)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from skyoap.proto.skywalking import common_pb2, tracing_pb2


class UndecodableSegment(ValueError):
    """Stored data that is not a segment's encoding."""


@dataclass(frozen=True, slots=True)
class Ref:
    ref_type: int
    """0 CrossProcess, 1 CrossThread."""
    trace_id: str = ""
    parent_segment_id: str = ""
    parent_span_id: int = 0


@dataclass(frozen=True, slots=True)
class SpanLog:
    time: int
    data: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StoredSpan:
    span_id: int = 0
    parent_span_id: int = 0
    start_time: int = 0
    end_time: int = 0
    refs: tuple[Ref, ...] = ()
    operation: str = ""
    peer: str = ""
    kind: int = 0
    """0 Entry, 1 Exit, 2 Local."""
    layer: int = 0
    component_id: int = 0
    is_error: bool = False
    tags: tuple[tuple[str, str], ...] = ()
    logs: tuple[SpanLog, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredSegment:
    trace_id: str = ""
    segment_id: str = ""
    service: str = ""
    instance: str = ""
    spans: tuple[StoredSpan, ...] = field(default=())


def _pairs(pairs: Iterable[common_pb2.KeyStringValuePair]) -> tuple[tuple[str, str], ...]:
    return tuple((p.key, p.value) for p in pairs)


def _span(s: tracing_pb2.SpanObject) -> StoredSpan:
    return StoredSpan(
        span_id=s.spanId,
        parent_span_id=s.parentSpanId,
        start_time=s.startTime,
        end_time=s.endTime,
        refs=tuple(Ref(r.refType, r.traceId, r.parentTraceSegmentId, r.parentSpanId) for r in s.refs),
        operation=s.operationName,
        peer=s.peer,
        kind=s.spanType,
        layer=s.spanLayer,
        component_id=s.componentId,
        is_error=s.isError,
        tags=_pairs(s.tags),
        logs=tuple(SpanLog(log.time, _pairs(log.data)) for log in s.logs),
    )


def decode_segment(data: str) -> StoredSegment:
    """The segment in a ``SegmentRecord.data`` (base64 of its protobuf encoding)."""
    try:
        segment = tracing_pb2.SegmentObject.FromString(base64.b64decode(data, validate=True))
    except binascii.Error:
        raise UndecodableSegment("the stored data is not base64") from None
    except DecodeError as e:
        raise UndecodableSegment(f"the stored data is not a segment's encoding ({e})") from None
    return StoredSegment(
        trace_id=segment.traceId,
        segment_id=segment.traceSegmentId,
        service=segment.service,
        instance=segment.serviceInstance,
        spans=tuple(_span(s) for s in segment.spans),
    )
