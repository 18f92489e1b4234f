"""Traces and logs as the query endpoint answers them: a stored segment read
back from protobuf's wire format, the spans of a trace in its tree's order,
conditions turned into storage searches and their bounds, and the searches
themselves on the embedded storage (in memory)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator

import pytest

from skyoap.model.records import LogRecord, SegmentRecord
from skyoap.model.spans import SegmentRules
from skyoap.model.stream import ColumnType, Text, Words
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.query import logs, traces
from skyoap.query.context import QueryContext
from skyoap.query.paging import Page, Window
from skyoap.query.segment_data import (
    Ref,
    SpanLog,
    StoredSegment,
    StoredSpan,
    UndecodableSegment,
    decode_segment,
)
from skyoap.receiver.segments import record_of
from skyoap.receiver.traces import segment_of
from skyoap.storage.api import RecordSearch
from skyoap.storage.embedded.db import Database
from skyoap.storage.embedded.records import EmbeddedRecordDAO
from skyoap.vocabulary.ids import BadId, service_name
from skyoap.vocabulary.ttl import TimesToLive
from skyoap.wiring.config import NodeConfig
from tests.unit.fakes import MemoryInventoryDAO, MemoryMetricsDAO

T0 = int(datetime.datetime(2026, 11, 21, 19, 5, tzinfo=datetime.UTC).timestamp() * 1000)
"""2026-11-21 19:05 UTC: minute bucket 202611211905."""
MINUTE = 202611211905
DURATION = {"start": "2026-11-21 1905", "end": "2026-11-21 1906", "step": "MINUTE"}
PAGE = {"pageNum": 1, "pageSize": 20}
A_ID, B_ID = "QQ==.1", "Qg==.1"  # the ids of services A and B


def kv(key: str, value: str) -> common_pb2.KeyStringValuePair:
    return common_pb2.KeyStringValuePair(key=key, value=value)


def a_segment(trace: str = "t1", start: int = T0, error: bool = False) -> tracing_pb2.SegmentObject:
    """A serves GET:/a (7001 Flask) and calls B over HTTP (7002 Requests)."""
    entry = tracing_pb2.SpanObject(
        spanId=0, parentSpanId=-1, startTime=start, endTime=start + 30, operationName="GET:/a",
        spanType=tracing_pb2.Entry, spanLayer=tracing_pb2.Http, componentId=7001, isError=error,
        tags=[kv("http.method", "GET"), kv("url", "/a")],
    )  # fmt: skip
    call = tracing_pb2.SpanObject(
        spanId=1, parentSpanId=0, startTime=start + 5, endTime=start + 25, operationName="GET:/b",
        peer="b:80", spanType=tracing_pb2.Exit, spanLayer=tracing_pb2.Http, componentId=7002,
        tags=[kv("http.method", "GET")],
    )  # fmt: skip
    return tracing_pb2.SegmentObject(
        traceId=trace, traceSegmentId=f"{trace}-a", service="A", serviceInstance="a-1", spans=[entry, call]
    )


def b_segment(trace: str = "t1", start: int = T0) -> tracing_pb2.SegmentObject:
    """B serves A's call and queries a database that fails, logging why."""
    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess, traceId=trace, parentTraceSegmentId=f"{trace}-a", parentSpanId=1,
        parentService="A", parentServiceInstance="a-1", parentEndpoint="GET:/a",
        networkAddressUsedAtPeer="b:80",
    )  # fmt: skip
    entry = tracing_pb2.SpanObject(
        spanId=0, parentSpanId=-1, startTime=start + 6, endTime=start + 24, operationName="GET:/b",
        spanType=tracing_pb2.Entry, spanLayer=tracing_pb2.Http, componentId=7004, refs=[ref],
    )  # fmt: skip
    query = tracing_pb2.SpanObject(
        spanId=1, parentSpanId=0, startTime=start + 8, endTime=start + 20, operationName="SELECT",
        peer="db:5432", spanType=tracing_pb2.Exit, spanLayer=tracing_pb2.Database, componentId=99999,
        isError=True, tags=[kv("db.type", "sql"), kv("db.statement", "SELECT 1")],
        logs=[tracing_pb2.Log(time=start + 20, data=[kv("event", "error"), kv("message", "timeout")])],
    )  # fmt: skip
    return tracing_pb2.SegmentObject(
        traceId=trace, traceSegmentId=f"{trace}-b", service="B", serviceInstance="b-1", spans=[entry, query]
    )


def test_a_stored_segment_reads_back_as_protobuf_encoded_it() -> None:
    data = Text(base64.b64encode(b_segment().SerializeToString()).decode())
    assert decode_segment(data) == StoredSegment(
        trace_id="t1",
        segment_id="t1-b",
        service="B",
        instance="b-1",
        spans=(
            StoredSpan(
                span_id=0, parent_span_id=-1, start_time=T0 + 6, end_time=T0 + 24,
                refs=(Ref(0, "t1", "t1-a", 1),), operation="GET:/b", kind=0, layer=3, component_id=7004,
            ),
            StoredSpan(
                span_id=1, parent_span_id=0, start_time=T0 + 8, end_time=T0 + 20, operation="SELECT",
                peer="db:5432", kind=1, layer=1, component_id=99999, is_error=True,
                tags=(("db.type", "sql"), ("db.statement", "SELECT 1")),
                logs=(SpanLog(T0 + 20, (("event", "error"), ("message", "timeout"))),),
            ),
        ),
    )  # fmt: skip


@pytest.mark.parametrize("data", ["not base64!", base64.b64encode(b"\x0a\x05ab").decode(), "AA=="])
def test_data_that_is_no_segment_is_refused(data: str) -> None:
    with pytest.raises(UndecodableSegment):
        decode_segment(Text(data))


def segments_of(*pbs: tracing_pb2.SegmentObject) -> list[StoredSegment]:
    return [decode_segment(Text(base64.b64encode(pb.SerializeToString()).decode())) for pb in pbs]


def test_the_spans_of_a_trace_come_each_after_its_parent_across_services() -> None:
    # B's segment first: the order is the trace's, not storage's.
    spans = traces.trace_spans(segments_of(b_segment(), a_segment()))
    assert [(s["serviceCode"], s["spanId"], s["parentSpanId"], s["depth"]) for s in spans] == [
        ("A", 0, -1, 0),
        ("A", 1, 0, 1),
        ("B", 0, -1, 2),
        ("B", 1, 0, 3),
    ]
    assert spans[2] == {
        "traceId": "t1",
        "segmentId": "t1-b",
        "spanId": 0,
        "parentSpanId": -1,
        "refs": [{"traceId": "t1", "parentSegmentId": "t1-a", "parentSpanId": 1, "type": "CROSS_PROCESS"}],
        "serviceCode": "B",
        "serviceInstanceName": "b-1",
        "startTime": T0 + 6,
        "endTime": T0 + 24,
        "endpointName": "GET:/b",
        "type": "Entry",
        "peer": "",
        "component": "Django",
        "isError": False,
        "layer": "Http",
        "tags": [],
        "logs": [],
        "attachedEvents": [],
        "depth": 2,
    }
    query = spans[3]
    assert (query["type"], query["layer"], query["component"], query["isError"]) == (
        "Exit",
        "Database",
        "99999",
        True,
    )
    assert query["tags"] == [{"key": "db.type", "value": "sql"}, {"key": "db.statement", "value": "SELECT 1"}]
    assert query["logs"] == [
        {
            "time": T0 + 20,
            "data": [{"key": "event", "value": "error"}, {"key": "message", "value": "timeout"}],
        }
    ]


def test_a_span_whose_parent_is_not_stored_starts_a_tree_of_its_own() -> None:
    spans = traces.trace_spans(segments_of(b_segment()))
    assert [(s["segmentId"], s["spanId"], s["depth"]) for s in spans] == [("t1-b", 0, 0), ("t1-b", 1, 1)]


def test_a_trace_condition_becomes_one_storage_search() -> None:
    condition = {
        "serviceInstanceId": "QQ==.1_YS0x",
        "queryDuration": DURATION,
        "minTraceDuration": 10,
        "maxTraceDuration": 100,
        "traceState": "ERROR",
        "queryOrder": "BY_DURATION",
        "tags": [{"key": "http.method", "value": "GET"}, {"key": "db.type", "value": "sql"}],
        "paging": {"pageNum": 3, "pageSize": 15},
    }
    assert traces.segment_search(condition) == RecordSearch(
        first_bucket=MINUTE,
        last_bucket=MINUTE + 1,
        equal={"service": "A", "instance": "a-1", "is_error": True},
        at_least={"latency_ms": 10, "start_time": T0},
        at_most={"latency_ms": 100, "start_time": T0 + 120_000 - 1},
        tags=("http.method=GET", "db.type=sql"),
        order_by="latency_ms",
        descending=True,
        offset=30,
        limit=15,
    )


def test_a_trace_id_alone_searches_every_day() -> None:
    condition = {"traceId": "t1", "traceState": "ALL", "queryOrder": "BY_START_TIME", "paging": PAGE}
    assert traces.segment_search(condition) == RecordSearch(
        equal={"trace_id": "t1"}, order_by="start_time", offset=0, limit=20
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queryDuration": None}, "a trace search needs a queryDuration or a traceId"),
        ({"paging": {"pageSize": 1001}}, "paging.pageSize must be 1 to 1000, not 1001"),
        ({"paging": {"pageSize": 0}}, "paging.pageSize must be 1 to 1000, not 0"),
        ({"paging": {"pageNum": 0, "pageSize": 10}}, "paging.pageNum counts from 1, not 0"),
        (
            {"paging": {"pageNum": 101, "pageSize": 100}},
            "paging reaches row 10100, past the first 10000 rows",
        ),
        ({"serviceId": "QQ=="}, "serviceId 'QQ==' is not an id skyoap gave"),
        ({"endpointId": "QQ==.1"}, "endpointId 'QQ==.1' is not an id skyoap gave"),
        (
            {"tags": [{"key": "http.method"}]},
            "trace tag 'http.method' has no value: traces are searched by a key and its value "
            "(queryTraceTagAutocompleteValues lists a key's values)",
        ),
        (
            {"queryDuration": {**DURATION, "end": "2026-11-21"}},
            "Duration end '2026-11-21' is not a time of step",
        ),
    ],
)
def test_a_trace_condition_that_cannot_be_answered_says_why(change: dict[str, object], message: str) -> None:
    condition = {
        "queryDuration": DURATION,
        "traceState": "ALL",
        "queryOrder": "BY_START_TIME",
        "paging": PAGE,
    }
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        traces.segment_search({**condition, **change})


def test_ids_name_what_they_were_built_from() -> None:
    assert service_name("QQ==.0") == "A"
    with pytest.raises(BadId):
        service_name("!!.1")
    assert Page.of({"pageSize": 20}) == Page(0, 20)
    assert Window.of({"start": "2026-11-21", "end": "2026-11-21", "step": "DAY"}) == Window(
        202611210000, 202611212359, T0 - (19 * 60 + 5) * 60_000, T0 + (4 * 60 + 55) * 60_000
    )


@pytest.fixture
def context() -> Iterator[QueryContext]:
    dao = EmbeddedRecordDAO(Database(":memory:"))
    dao.install([SegmentRecord, LogRecord])
    yield QueryContext(MemoryInventoryDAO(), MemoryMetricsDAO(), dao, TimesToLive(3, 1, 7, 90, 7, 7))
    dao.close()


def store(context: QueryContext, *pbs: tracing_pb2.SegmentObject) -> None:
    context.records.insert(SegmentRecord, [record_of(segment_of(pb)) for pb in pbs])


def basic(context: QueryContext, **condition: object) -> list[tuple[str, int, bool]]:
    given = {"queryDuration": DURATION, "traceState": "ALL", "queryOrder": "BY_START_TIME", "paging": PAGE}
    answer = traces.query_basic_traces(context, {**given, **condition})
    return [(t["segmentId"], t["duration"], t["isError"]) for t in answer["traces"]]


def test_the_receiver_keeps_a_segments_searchable_tags_distinct_and_sorted() -> None:
    record = record_of(segment_of(b_segment()))
    assert record.tags == ("db.type=sql",)
    long_value = a_segment()
    long_value.spans[0].tags.append(kv("http.status_code", "5" * 300))
    assert record_of(segment_of(long_value)).tags == ("http.method=GET",)
    only_urls = SegmentRules(NodeConfig().limits.items(), frozenset({"url"}))
    assert record_of(segment_of(a_segment(), only_urls)).tags == ("url=/a",)
    assert dict((c.name, c.type) for c in SegmentRecord.columns())["tags"] is ColumnType.STRINGS


def test_traces_are_found_by_tag_state_duration_and_paged(context: QueryContext) -> None:
    store(context, a_segment("t1"), b_segment("t1"), a_segment("t2", T0 + 1000, error=True))
    everything = [("t2-a", 30, True), ("t1-b", 18, True), ("t1-a", 30, False)]
    assert basic(context) == everything
    assert basic(context, tags=[{"key": "http.method", "value": "GET"}]) == [
        ("t2-a", 30, True),
        ("t1-a", 30, False),
    ]
    assert basic(context, tags=[{"key": "db.type", "value": "sql"}]) == [("t1-b", 18, True)]
    assert (
        basic(context, tags=[{"key": "http.method", "value": "GET"}, {"key": "db.type", "value": "sql"}])
        == []
    )
    assert basic(context, traceState="ERROR") == [("t2-a", 30, True), ("t1-b", 18, True)]
    assert basic(context, traceState="SUCCESS") == [("t1-a", 30, False)]
    assert basic(context, maxTraceDuration=20) == [("t1-b", 18, True)]
    assert basic(context, queryOrder="BY_DURATION") == [
        ("t1-a", 30, False),
        ("t2-a", 30, True),
        ("t1-b", 18, True),
    ]
    assert basic(context, paging={"pageNum": 2, "pageSize": 2}) == [("t1-a", 30, False)]
    assert basic(context, serviceId=B_ID) == [("t1-b", 18, True)]
    assert basic(context, endpointId="QQ==.1_R0VUOi9h") == [("t2-a", 30, True), ("t1-a", 30, False)]
    assert basic(context, traceId="t2", queryDuration=None) == [("t2-a", 30, True)]
    later = {"start": "2026-11-21 1907", "end": "2026-11-21 1910", "step": "MINUTE"}
    assert basic(context, queryDuration=later) == []
    assert traces.query_basic_traces(
        context, {"traceId": "t1", "traceState": "ALL", "queryOrder": "BY_START_TIME", "paging": PAGE}
    )["traces"][1] == {
        "segmentId": "t1-a",
        "endpointNames": ["GET:/a"],
        "duration": 30,
        "start": str(T0),
        "isError": False,
        "traceIds": ["t1"],
    }


def test_a_trace_is_read_whole_by_its_id(context: QueryContext) -> None:
    store(context, b_segment("t1"), a_segment("t1"), a_segment("t2"))
    spans = traces.query_trace(context, traceId="t1")["spans"]
    assert [(s["segmentId"], s["spanId"]) for s in spans] == [
        ("t1-a", 0),
        ("t1-a", 1),
        ("t1-b", 0),
        ("t1-b", 1),
    ]
    assert traces.query_trace(context, traceId="nope") == {"spans": []}


def test_tag_autocomplete_answers_what_is_stored_in_the_window(context: QueryContext) -> None:
    store(context, a_segment("t1"), b_segment("t1"))
    assert traces.tag_keys(context, DURATION) == ["db.type", "http.method"]
    assert traces.tag_values(context, tagKey="http.method", duration=DURATION) == ["GET"]
    assert traces.tag_values(context, tagKey="http", duration=DURATION) == []
    later = {"start": "2026-11-21 1907", "end": "2026-11-21 1910", "step": "MINUTE"}
    assert traces.tag_keys(context, later) == []


def test_a_table_of_an_earlier_release_gains_the_tags_column() -> None:
    db = Database(":memory:")
    db.execute(
        "CREATE TABLE segment (key TEXT PRIMARY KEY, day INTEGER NOT NULL, time_bucket INTEGER, "
        "segment_id TEXT, trace_id TEXT, service TEXT, instance TEXT, endpoint TEXT, start_time INTEGER, "
        "end_time INTEGER, latency_ms INTEGER, is_error INTEGER, spans INTEGER, data TEXT)"
    )
    db.execute(
        "INSERT INTO segment VALUES ('s', 20261121, ?, 's', 't', 'A', 'a-1', '/', ?, ?, 1, 0, 1, 'AA==')",
        [MINUTE, T0, T0 + 1],
    )
    dao = EmbeddedRecordDAO(db)
    dao.install([SegmentRecord])
    [old] = dao.search(SegmentRecord, RecordSearch(equal={"trace_id": "t"}, order_by="start_time"))
    assert (old.segment_id, old.tags) == ("s", ())
    indices = {row[1] for row in db.fetch("PRAGMA index_list(segment)")}
    assert "segment_trace" in indices
    dao.close()


def log_record(i: int, trace: str, span: int = 0, **fields: object) -> LogRecord:
    values: dict[str, object] = {
        "time_bucket": MINUTE, "log_id": f"log{i}", "timestamp": T0 + i, "service": "B", "instance": "b-1",
        "endpoint": "GET:/b", "trace_id": trace, "segment_id": f"{trace}-b", "span_id": span,
        "content_type": "text", "content": Words(f"line {i}"), "tags": {"level": "ERROR", "a": "1"},
        "searchable_tags": ("level=ERROR",),
    }  # fmt: skip
    values.update(fields)
    return LogRecord(**values)  # type: ignore[arg-type]


def test_logs_are_found_by_trace_span_and_entity(context: QueryContext) -> None:
    context.records.insert(
        LogRecord,
        [
            log_record(0, "t1"),
            log_record(1, "t1", span=1),
            log_record(2, "t2"),
            log_record(
                3,
                "",
                service="A",
                instance="",
                endpoint="",
                content_type="json",
                content=Words("{}"),
                tags={"level": "INFO"},
                searchable_tags=("level=INFO",),
            ),
        ],
    )

    def found(**condition: object) -> list[str]:
        answer = logs.query_logs(context, {"paging": PAGE, **condition})
        assert answer["errorReason"] is None
        return [log["content"] for log in answer["logs"]]

    assert found(relatedTrace={"traceId": "t1"}) == ["line 1", "line 0"]
    # Empty ids and conditions search by nothing, as SkyWalking's CLI sends them.
    swctl = {
        "relatedTrace": {"traceId": ""},
        "serviceId": "",
        "endpointId": "",
        "tags": [],
        "keywordsOfContent": [],
    }
    assert found(queryDuration=DURATION, **swctl) == ["{}", "line 2", "line 1", "line 0"]
    assert found(queryDuration=DURATION, tags=[{"key": "level", "value": "INFO"}]) == ["{}"]
    assert found(queryDuration=DURATION, tags=[{"key": "level", "value": "ERROR"}, None]) == [
        "line 2",
        "line 1",
        "line 0",
    ]
    assert found(queryDuration=DURATION, tags=[{"key": "a", "value": "1"}]) == []  # not a searchable key
    assert logs.tag_keys(context, DURATION) == ["level"]
    assert logs.tag_values(context, "level", DURATION) == ["ERROR", "INFO"]
    assert found(relatedTrace={"traceId": "t1", "segmentId": "t1-b", "spanId": 1}) == ["line 1"]
    assert found(queryDuration=DURATION, queryOrder="ASC") == ["line 0", "line 1", "line 2", "{}"]
    assert found(queryDuration=DURATION, serviceId=A_ID) == ["{}"]
    assert found(queryDuration=DURATION, keywordsOfContent=["LINE 1"]) == ["line 1"]
    assert found(queryDuration=DURATION, keywordsOfContent=["line", "2"]) == ["line 2"]
    assert found(queryDuration=DURATION, excludingKeywordsOfContent=["line"]) == ["{}"]
    # A blank keyword would match every log: it is left out.
    assert found(queryDuration=DURATION, keywordsOfContent=[" ", "2"], excludingKeywordsOfContent=[""]) == [
        "line 2"
    ]
    assert found(
        queryDuration=DURATION, serviceInstanceId="Qg==.1_Yi0x", paging={"pageNum": 2, "pageSize": 2}
    ) == ["line 0"]
    answer = logs.query_logs(context, {"paging": PAGE, "queryDuration": DURATION})["logs"]
    assert answer[0] == {
        "serviceName": "A",
        "serviceId": A_ID,
        "serviceInstanceName": None,
        "serviceInstanceId": None,
        "endpointName": None,
        "endpointId": None,
        "traceId": None,
        "timestamp": T0 + 3,
        "contentType": "JSON",
        "content": "{}",
        "tags": [{"key": "level", "value": "INFO"}],
    }
    assert answer[1] == {
        "serviceName": "B",
        "serviceId": B_ID,
        "serviceInstanceName": "b-1",
        "serviceInstanceId": "Qg==.1_Yi0x",
        "endpointName": "GET:/b",
        "endpointId": "Qg==.1_R0VUOi9i",
        "traceId": "t2",
        "timestamp": T0 + 2,
        "contentType": "TEXT",
        "content": "line 2",
        "tags": [{"key": "a", "value": "1"}, {"key": "level", "value": "ERROR"}],
    }


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ({}, "a log search needs a queryDuration or a relatedTrace"),
        (
            {"queryDuration": DURATION, "tags": [{"key": "level"}]},
            "log tag 'level' has no value: logs are searched by a key and its value "
            "\\(queryLogTagAutocompleteValues lists a key's values\\)",
        ),
        (
            {"queryDuration": DURATION, "tags": [{"key": "level", "value": str(i)} for i in range(21)]},
            "a search filters by at most 20 tags, not 21",
        ),
        (
            {"queryDuration": DURATION, "keywordsOfContent": [str(i) for i in range(11)]},
            "a log search takes at most 10 keywords, not 11",
        ),
        (
            {"queryDuration": DURATION, "paging": {"pageSize": 5000}},
            "paging.pageSize must be 1 to 1000, not 5000",
        ),
    ],
)
def test_a_log_condition_that_cannot_be_answered_says_why(condition: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message):
        logs.log_search({"paging": PAGE, **condition})
