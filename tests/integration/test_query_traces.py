"""Traces and logs asked of a node's query endpoint as SkyWalking's UI asks
them, on both storages: two services calling each other (A serves GET:/a and
calls B, which queries a database that fails and logs it in its span), a
second trace of A alone, and log lines of both traces."""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc

from skyoap.proto.skywalking import common_pb2, logging_pb2, tracing_pb2
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect

# What SkyWalking's UI (booster-ui) sends.
QUERY_TRACES = """query queryTraces($condition: TraceQueryCondition) {
  data: queryBasicTraces(condition: $condition) {
    traces { key: segmentId endpointNames duration start isError traceIds }
  }
}"""
QUERY_TRACE = """query queryTrace($traceId: ID!) {
  trace: queryTrace(traceId: $traceId) {
    spans {
      traceId segmentId spanId parentSpanId
      refs { traceId parentSegmentId parentSpanId type }
      serviceCode serviceInstanceName startTime endTime endpointName type peer component isError layer
      tags { key value }
      logs { time data { key value } }
      attachedEvents { startTime { seconds nanos } event endTime { seconds nanos } tags { key value }
        summary { key value } }
    }
  }
}"""
QUERY_LOGS = """query queryLogs($condition: LogQueryCondition) {
  queryLogs(condition: $condition) {
    logs {
      serviceName serviceId serviceInstanceName serviceInstanceId endpointName endpointId traceId
      timestamp contentType content tags { key value }
    }
  }
}"""
LOG_TAG_KEYS = """query queryLogTagAutocompleteKeys($duration: Duration!) {
  tagKeys: queryLogTagAutocompleteKeys(duration: $duration)
}"""
LOG_TAG_VALUES = """query queryLogTagAutocompleteValues($tagKey: String!, $duration: Duration!) {
  tagValues: queryLogTagAutocompleteValues(tagKey: $tagKey, duration: $duration)
}"""
TAG_KEYS = """query queryTraceTagAutocompleteKeys($duration: Duration!) {
  tagKeys: queryTraceTagAutocompleteKeys(duration: $duration)
}"""
TAG_VALUES = """query queryTraceTagAutocompleteValues($tagKey: String!, $duration: Duration!) {
  tagValues: queryTraceTagAutocompleteValues(tagKey: $tagKey, duration: $duration)
}"""

A_ID, B_ID = "QQ==.1", "Qg==.1"


def kv(key: str, value: str) -> common_pb2.KeyStringValuePair:
    return common_pb2.KeyStringValuePair(key=key, value=value)


def span_of(**fields: Any) -> tracing_pb2.SpanObject:
    return tracing_pb2.SpanObject(**fields)


def segments(now: int) -> list[tracing_pb2.SegmentObject]:
    a_entry = span_of(
        spanId=0,
        parentSpanId=-1,
        startTime=now,
        endTime=now + 30,
        operationName="GET:/a",
        spanType=tracing_pb2.Entry,
        spanLayer=tracing_pb2.Http,
        componentId=7001,
        tags=[kv("http.method", "GET"), kv("url", "http://a/a")],
    )
    a_exit = span_of(
        spanId=1,
        parentSpanId=0,
        startTime=now + 5,
        endTime=now + 25,
        operationName="GET:/b",
        peer="b:80",
        spanType=tracing_pb2.Exit,
        spanLayer=tracing_pb2.Http,
        componentId=7002,
    )
    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess,
        traceId="t1",
        parentTraceSegmentId="t1-a",
        parentSpanId=1,
        parentService="A",
        parentServiceInstance="a-1",
        parentEndpoint="GET:/a",
        networkAddressUsedAtPeer="b:80",
    )
    b_entry = span_of(
        spanId=0,
        parentSpanId=-1,
        startTime=now + 6,
        endTime=now + 24,
        operationName="GET:/b",
        spanType=tracing_pb2.Entry,
        spanLayer=tracing_pb2.Http,
        componentId=7004,
        refs=[ref],
        tags=[kv("http.method", "GET")],
    )
    b_query = span_of(
        spanId=1,
        parentSpanId=0,
        startTime=now + 8,
        endTime=now + 20,
        operationName="SELECT",
        peer="db:5432",
        spanType=tracing_pb2.Exit,
        spanLayer=tracing_pb2.Database,
        componentId=7010,
        isError=True,
        tags=[kv("db.type", "sql")],
        logs=[tracing_pb2.Log(time=now + 20, data=[kv("event", "error"), kv("message", "timeout")])],
    )
    a_later = span_of(
        spanId=0,
        parentSpanId=-1,
        startTime=now + 1000,
        endTime=now + 1040,
        operationName="POST:/a",
        spanType=tracing_pb2.Entry,
        spanLayer=tracing_pb2.Http,
        componentId=7001,
        tags=[kv("http.method", "POST")],
    )
    return [
        tracing_pb2.SegmentObject(
            traceId="t1", traceSegmentId="t1-a", service="A", serviceInstance="a-1", spans=[a_entry, a_exit]
        ),
        tracing_pb2.SegmentObject(
            traceId="t1", traceSegmentId="t1-b", service="B", serviceInstance="b-1", spans=[b_entry, b_query]
        ),
        tracing_pb2.SegmentObject(
            traceId="t2", traceSegmentId="t2-a", service="A", serviceInstance="a-1", spans=[a_later]
        ),
    ]


def log_lines(now: int) -> list[logging_pb2.LogData]:
    def line(at: int, trace: str, segment: str, text: str, level: str = "ERROR") -> logging_pb2.LogData:
        return logging_pb2.LogData(
            timestamp=at,
            service="B" if segment.endswith("b") else "A",
            serviceInstance="b-1" if segment.endswith("b") else "a-1",
            endpoint="GET:/b" if segment.endswith("b") else "POST:/a",
            body=logging_pb2.LogDataBody(text=logging_pb2.TextLog(text=text)),
            traceContext=logging_pb2.TraceContext(traceId=trace, traceSegmentId=segment, spanId=1),
            tags=logging_pb2.LogTags(data=[kv("level", level), kv("thread", "main")]),
        )

    return [
        line(now + 9, "t1", "t1-b", "querying"),
        line(now + 20, "t1", "t1-b", "timeout"),
        line(now + 1001, "t2", "t2-a", "posted", "INFO"),
    ]


def send_logs(address: str, lines: list[logging_pb2.LogData]) -> None:
    with grpc.insecure_channel(address) as channel:
        channel.stream_unary(
            "/skywalking.v3.LogReportService/collect",
            request_serializer=logging_pb2.LogData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(iter(lines), timeout=60)


def ask(url: str, query: str, variables: dict[str, Any]) -> Any:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())


def minute(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H%M")


def expected_spans(now: int) -> list[dict[str, Any]]:
    def span(segment: str, span_id: int, parent: int, start: int, end: int, **more: Any) -> dict[str, Any]:
        service = "A" if segment.endswith("a") else "B"
        return {
            "traceId": "t1",
            "segmentId": segment,
            "spanId": span_id,
            "parentSpanId": parent,
            "refs": more.get("refs", []),
            "serviceCode": service,
            "serviceInstanceName": f"{service.lower()}-1",
            "startTime": now + start,
            "endTime": now + end,
            "endpointName": more["endpoint"],
            "type": more["type"],
            "peer": more.get("peer", ""),
            "component": more["component"],
            "isError": more.get("error", False),
            "layer": more["layer"],
            "tags": more.get("tags", []),
            "logs": more.get("logs", []),
            "attachedEvents": [],
        }

    return [
        span(
            "t1-a",
            0,
            -1,
            0,
            30,
            endpoint="GET:/a",
            type="Entry",
            component="Flask",
            layer="Http",
            tags=[{"key": "http.method", "value": "GET"}, {"key": "url", "value": "http://a/a"}],
        ),
        span(
            "t1-a",
            1,
            0,
            5,
            25,
            endpoint="GET:/b",
            type="Exit",
            peer="b:80",
            component="Requests",
            layer="Http",
        ),
        span(
            "t1-b",
            0,
            -1,
            6,
            24,
            endpoint="GET:/b",
            type="Entry",
            component="Django",
            layer="Http",
            refs=[{"traceId": "t1", "parentSegmentId": "t1-a", "parentSpanId": 1, "type": "CROSS_PROCESS"}],
            tags=[{"key": "http.method", "value": "GET"}],
        ),
        span(
            "t1-b",
            1,
            0,
            8,
            20,
            endpoint="SELECT",
            type="Exit",
            peer="db:5432",
            component="Psychopg",
            layer="Database",
            error=True,
            tags=[{"key": "db.type", "value": "sql"}],
            logs=[
                {
                    "time": now + 20,
                    "data": [{"key": "event", "value": "error"}, {"key": "message", "value": "timeout"}],
                }
            ],
        ),
    ]


def test_traces_and_logs_are_answered_as_the_ui_asks(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    url = node.query_url
    assert url is not None
    now = int(time.time() * 1000) - 120_000
    collect(node.address, segments(now))
    send_logs(node.address, log_lines(now))
    duration = {"start": minute(now - 60_000), "end": minute(now + 60_000), "step": "MINUTE"}
    page = {"pageNum": 1, "pageSize": 20}

    def traces(**condition: Any) -> list[str]:
        given = {
            "queryDuration": duration,
            "traceState": "ALL",
            "queryOrder": "BY_START_TIME",
            "paging": page,
        }
        answer = ask(url, QUERY_TRACES, {"condition": {**given, **condition}})
        assert "errors" not in answer, answer
        return [t["key"] for t in answer["data"]["data"]["traces"]]

    eventually(lambda: traces() == ["t2-a", "t1-b", "t1-a"])
    answer = ask(
        url,
        QUERY_TRACES,
        {"condition": {"traceId": "t1", "traceState": "ALL", "queryOrder": "BY_START_TIME", "paging": page}},
    )
    assert answer == {
        "data": {
            "data": {
                "traces": [
                    {
                        "key": "t1-b",
                        "endpointNames": ["GET:/b"],
                        "duration": 18,
                        "start": str(now + 6),
                        "isError": True,
                        "traceIds": ["t1"],
                    },
                    {
                        "key": "t1-a",
                        "endpointNames": ["GET:/a"],
                        "duration": 30,
                        "start": str(now),
                        "isError": False,
                        "traceIds": ["t1"],
                    },
                ]
            }
        }
    }
    assert traces(tags=[{"key": "db.type", "value": "sql"}]) == ["t1-b"]
    assert traces(tags=[{"key": "http.method", "value": "POST"}]) == ["t2-a"]
    assert traces(tags=[{"key": "http.method", "value": "GET"}]) == ["t1-b", "t1-a"]
    assert traces(tags=[{"key": "url", "value": "http://a/a"}]) == []  # not a searchable key
    assert traces(traceState="ERROR") == ["t1-b"]
    assert traces(traceState="SUCCESS") == ["t2-a", "t1-a"]
    assert traces(serviceId=B_ID) == ["t1-b"]
    assert traces(queryOrder="BY_DURATION") == ["t2-a", "t1-a", "t1-b"]
    assert traces(paging={"pageNum": 2, "pageSize": 1}) == ["t1-b"]
    assert traces(paging={"pageNum": 2, "pageSize": 2}) == ["t1-a"]

    trace = ask(url, QUERY_TRACE, {"traceId": "t1"})
    assert trace == {"data": {"trace": {"spans": expected_spans(now)}}}
    assert ask(url, QUERY_TRACE, {"traceId": "none"}) == {"data": {"trace": {"spans": []}}}

    assert ask(url, TAG_KEYS, {"duration": duration}) == {"data": {"tagKeys": ["db.type", "http.method"]}}
    values = ask(url, TAG_VALUES, {"tagKey": "http.method", "duration": duration})
    assert values == {"data": {"tagValues": ["GET", "POST"]}}

    def logs(**condition: Any) -> Any:
        answer = ask(url, QUERY_LOGS, {"condition": {"paging": page, **condition}})
        assert "errors" not in answer, answer
        return answer["data"]["queryLogs"]["logs"]

    eventually(lambda: len(logs(queryDuration=duration)) == 3)
    b_log = {
        "serviceName": "B",
        "serviceId": B_ID,
        "serviceInstanceName": "b-1",
        "serviceInstanceId": "Qg==.1_Yi0x",
        "endpointName": "GET:/b",
        "endpointId": "Qg==.1_R0VUOi9i",
        "traceId": "t1",
        "contentType": "TEXT",
        "tags": [{"key": "level", "value": "ERROR"}, {"key": "thread", "value": "main"}],
    }
    assert logs(relatedTrace={"traceId": "t1"}) == [
        {**b_log, "timestamp": now + 20, "content": "timeout"},
        {**b_log, "timestamp": now + 9, "content": "querying"},
    ]
    assert [g["content"] for g in logs(queryDuration=duration, queryOrder="ASC")] == [
        "querying",
        "timeout",
        "posted",
    ]
    assert [g["content"] for g in logs(queryDuration=duration, serviceId=A_ID)] == ["posted"]
    # As SkyWalking's CLI asks: empty ids search by nothing.
    swctl = {"queryDuration": duration, "relatedTrace": {"traceId": ""}, "serviceId": "", "tags": []}
    assert [g["content"] for g in logs(**swctl)] == ["posted", "timeout", "querying"]

    def by_tag(key: str, value: str) -> list[str]:
        return [g["content"] for g in logs(queryDuration=duration, tags=[{"key": key, "value": value}])]

    assert by_tag("level", "ERROR") == ["timeout", "querying"]
    assert by_tag("level", "INFO") == ["posted"]
    assert by_tag("thread", "main") == []  # not a searchable key
    assert ask(url, LOG_TAG_KEYS, {"duration": duration}) == {"data": {"tagKeys": ["level"]}}
    values = ask(url, LOG_TAG_VALUES, {"tagKey": "level", "duration": duration})
    assert values == {"data": {"tagValues": ["ERROR", "INFO"]}}


def test_a_trace_search_that_cannot_be_answered_says_why_and_the_node_serves_on(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    url = node.query_url
    assert url is not None
    given = {"traceState": "ALL", "queryOrder": "BY_START_TIME", "paging": {"pageNum": 1, "pageSize": 20}}
    answer = ask(url, QUERY_TRACES, {"condition": given})
    assert answer["data"] == {"data": None}
    assert [e["message"] for e in answer["errors"]] == [
        "a trace search needs a queryDuration or a traceId: searching every segment stored is refused"
    ]
    answer = ask(url, QUERY_TRACES, {"condition": {**given, "traceId": "t1", "paging": {"pageSize": 10_001}}})
    assert [e["message"] for e in answer["errors"]] == ["paging.pageSize must be 1 to 1000, not 10001"]
    answer = ask(url, QUERY_LOGS, {"condition": {"paging": {"pageSize": 20}}})
    assert [e["message"] for e in answer["errors"]] == [
        "a log search needs a queryDuration or a relatedTrace: searching every log stored is refused"
    ]
    assert ask(url, QUERY_TRACES, {"condition": {**given, "traceId": "t1"}}) == {
        "data": {"data": {"traces": []}}
    }
