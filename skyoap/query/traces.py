"""Traces: the segments a condition matches (``queryBasicTraces``), every
span of one trace (``queryTrace``), and the searchable tags stored
(``queryTraceTagAutocompleteKeys`` and ``...Values``)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from skyoap.model.records import SegmentRecord
from skyoap.model.spans import RefType, SpanKind, SpanLayer
from skyoap.query import conditions, record_tags
from skyoap.query.components import component_name
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.query.segment_data import StoredSegment, StoredSpan, UndecodableSegment, decode_segment
from skyoap.storage.api import RecordSearch
from skyoap.vocabulary.ids import endpoint_names, instance_names, service_name

log = logging.getLogger(__name__)

MAX_TRACE_SEGMENTS = 10_000
"""The most segments of one trace read (what Elasticsearch reads of a search by default)."""


class TraceState(enum.Enum):
    ALL = "ALL"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


class QueryOrder(enum.Enum):
    BY_START_TIME = "start_time"
    BY_DURATION = "latency_ms"


def query_basic_traces(
    context: QueryContext, condition: Mapping[str, Any] | None = None, debug: bool | None = None
) -> dict[str, Any]:
    """One BasicTrace per segment ``condition`` matches, the newest (or the
    longest) first."""
    if condition is None:
        raise ValueError("queryBasicTraces needs a condition with a traceId or a queryDuration")
    search = segment_search(condition)
    return {"traces": [basic_trace(r) for r in context.records.search(SegmentRecord, search)]}


def query_basic_traces_by_name(
    context: QueryContext, condition: Mapping[str, Any] | None = None, debug: bool | None = None
) -> dict[str, Any]:
    """``queryBasicTraces`` of the ids the condition's names have."""
    return query_basic_traces(context, None if condition is None else conditions.with_ids(condition), debug)


def segment_search(condition: Mapping[str, Any]) -> RecordSearch:
    """The search of a ``TraceQueryCondition``; ValueError for one that cannot be answered."""
    trace_id, duration = condition.get("traceId"), condition.get("queryDuration")
    if not trace_id and duration is None:
        raise ValueError(
            "a trace search needs a queryDuration or a traceId: searching every segment stored is refused"
        )
    equal: dict[str, str | int | bool] = {}
    at_least: dict[str, int] = {}
    at_most: dict[str, int] = {}
    if trace_id:
        equal["trace_id"] = trace_id
    if condition.get("serviceId"):
        equal["service"] = service_name(condition["serviceId"])
    if condition.get("serviceInstanceId"):
        equal["service"], equal["instance"] = instance_names(condition["serviceInstanceId"])
    if condition.get("endpointId"):
        equal["service"], equal["endpoint"] = endpoint_names(condition["endpointId"])
    state = TraceState[condition.get("traceState") or "ALL"]
    if state is not TraceState.ALL:
        equal["is_error"] = state is TraceState.ERROR
    if condition.get("minTraceDuration") is not None:
        at_least["latency_ms"] = condition["minTraceDuration"]
    if condition.get("maxTraceDuration") is not None:
        at_most["latency_ms"] = condition["maxTraceDuration"]
    first = last = None
    if duration is not None:
        window = Window.of(duration)
        first, last = window.first_bucket, window.last_bucket
        at_least["start_time"], at_most["start_time"] = window.start_ms, window.end_ms - 1
    page = Page.of(condition["paging"])
    return RecordSearch(
        first_bucket=first,
        last_bucket=last,
        equal=equal,
        at_least=at_least,
        at_most=at_most,
        tags=record_tags.searched(condition.get("tags") or (), "trace", "queryTraceTagAutocompleteValues"),
        order_by=QueryOrder[condition.get("queryOrder") or "BY_START_TIME"].value,
        descending=True,
        offset=page.offset,
        limit=page.limit,
    )


def basic_trace(record: SegmentRecord) -> dict[str, Any]:
    return {
        "segmentId": record.segment_id,
        "endpointNames": [record.endpoint] if record.endpoint else [],
        "duration": record.latency_ms,
        "start": str(record.start_time),
        "isError": record.is_error,
        "traceIds": [record.trace_id],
    }


def query_trace(
    context: QueryContext,
    traceId: str,
    duration: Mapping[str, Any] | None = None,
    debug: bool | None = None,
) -> dict[str, Any]:
    """Every span of every segment of the trace, each after its parent.
    Found by the trace id alone, whatever the day: ``duration`` is BanyanDB's
    and not needed here."""
    search = RecordSearch(
        equal={"trace_id": traceId}, order_by="start_time", descending=False, limit=MAX_TRACE_SEGMENTS
    )
    records = context.records.search(SegmentRecord, search)
    return {"spans": trace_spans(_decoded(records))}


def _decoded(records: Sequence[SegmentRecord]) -> list[StoredSegment]:
    segments = []
    for record in records:
        try:
            segments.append(decode_segment(record.data))
        except UndecodableSegment as e:
            log.warning("segment %s of trace %s cannot be read: %s", record.segment_id, record.trace_id, e)
    return segments


def trace_spans(segments: Sequence[StoredSegment]) -> list[dict[str, Any]]:
    """The spans of ``segments`` as the protocol answers them, in the order of
    the trace's tree: each span after its parent (in its segment, or the span
    its segment's reference names), siblings by start time; a span whose
    parent is not stored starts a tree of its own. Each carries its depth in
    that tree (0: a root), so that a client draws the tree without knowing
    the parent rule."""
    spans = {(seg.segment_id, s.span_id): (seg, s) for seg in segments for s in seg.spans}
    children: dict[tuple[str, int] | None, list[tuple[StoredSegment, StoredSpan]]] = {}
    for seg, span in spans.values():
        parent = _parent(seg, span)
        children.setdefault(parent if parent in spans else None, []).append((seg, span))
    ordered: list[dict[str, Any]] = []
    stack = [(seg, span, 0) for seg, span in sorted(children.get(None, []), key=_order, reverse=True)]
    while stack:
        seg, span, depth = stack.pop()
        ordered.append(span_answer(seg, span, depth))
        below = sorted(children.get((seg.segment_id, span.span_id), []), key=_order, reverse=True)
        stack.extend((child_seg, child, depth + 1) for child_seg, child in below)
    return ordered


def _parent(seg: StoredSegment, span: StoredSpan) -> tuple[str, int] | None:
    if span.parent_span_id >= 0:
        return seg.segment_id, span.parent_span_id
    if span.refs:
        return span.refs[0].parent_segment_id, span.refs[0].parent_span_id
    return None


def _order(item: tuple[StoredSegment, StoredSpan]) -> tuple[int, str, int]:
    seg, span = item
    return span.start_time, seg.segment_id, span.span_id


def span_answer(seg: StoredSegment, span: StoredSpan, depth: int) -> dict[str, Any]:
    """A ``Span`` of the protocol, ``depth`` deep in its trace's tree."""
    return {
        "traceId": seg.trace_id,
        "segmentId": seg.segment_id,
        "spanId": span.span_id,
        "parentSpanId": span.parent_span_id,
        "refs": [
            {
                "traceId": r.trace_id,
                "parentSegmentId": r.parent_segment_id,
                "parentSpanId": r.parent_span_id,
                "type": RefType.label_of(r.ref_type),
            }
            for r in span.refs
        ],
        "serviceCode": seg.service,
        "serviceInstanceName": seg.instance,
        "startTime": span.start_time,
        "endTime": span.end_time,
        "endpointName": span.operation,
        "type": SpanKind.label_of(span.kind),
        "peer": span.peer,
        "component": component_name(span.component_id),
        "isError": span.is_error,
        "layer": SpanLayer.label_of(span.layer),
        "tags": [{"key": k, "value": v} for k, v in span.tags],
        "logs": [
            {"time": entry.time, "data": [{"key": k, "value": v} for k, v in entry.data]}
            for entry in span.logs
        ],
        "attachedEvents": [],
        "depth": depth,
    }


def tag_keys(context: QueryContext, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_keys(context, SegmentRecord, duration)


def tag_values(context: QueryContext, tagKey: str, duration: Mapping[str, Any]) -> list[str]:
    return record_tags.tag_values(context, SegmentRecord, tagKey, duration)
