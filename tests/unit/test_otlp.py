"""OTLP spans as SkyWalking segments, and the callers of entry spans found
from parent spans that arrive later."""

from __future__ import annotations

from typing import Any

import pytest

from skyoap.model.checks import Reason, Refused
from skyoap.model.metrics import SEP
from skyoap.model.spans import Segment, SegmentRules, Span, SpanRef
from skyoap.proto.otlp import common_pb2, trace_pb2
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver.otlp import Callers, Source, by_start, peer_of, segment_object
from skyoap.receiver.segments import Call
from skyoap.runtime.instruments import Instruments
from skyoap.wiring.config import NodeConfig

SERVER, CLIENT, INTERNAL = (trace_pb2.Span.SPAN_KIND_SERVER, trace_pb2.Span.SPAN_KIND_CLIENT,
                            trace_pb2.Span.SPAN_KIND_INTERNAL)  # fmt: skip
TRACE = bytes(range(16))
MS = 1_000_000


def span(
    sid: int, name: str, kind: Any, parent: int = 0, start_ms: int = 1_000, **attrs: str
) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=TRACE,
        span_id=sid.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        kind=kind,
        start_time_unix_nano=start_ms * MS,
        end_time_unix_nano=(start_ms + 20) * MS,
        attributes=[
            common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(string_value=v)) for k, v in attrs.items()
        ],
    )


def test_spans_become_a_segment_numbered_by_start_with_entries_exits_and_a_reference() -> None:
    http = {"http.request.method": "GET", "server.address": "web", "server.port": "80"}
    spans = by_start([
        span(3, "SELECT", CLIENT, parent=2, start_ms=1_010, **{"db.system": "mysql", "server.address": "db"}),
        span(2, "GET /a", SERVER, parent=9, start_ms=1_000, **http),
        span(4, "work", INTERNAL, parent=2, start_ms=1_005),
    ])  # fmt: skip
    segment = segment_object(TRACE, Source("web", "web-1"), spans)
    assert (segment.traceId, segment.traceSegmentId, segment.service, segment.serviceInstance) == (
        TRACE.hex(), f"{TRACE.hex()}.{(2).to_bytes(8, 'big').hex()}", "web", "web-1",
    )  # fmt: skip
    got = [
        (s.spanId, s.parentSpanId, s.operationName, s.spanType, s.spanLayer, s.peer) for s in segment.spans
    ]
    assert got == [
        (0, -1, "GET /a", tracing_pb2.Entry, 3, ""),
        (1, 0, "work", tracing_pb2.Local, 0, ""),
        (2, 0, "SELECT", tracing_pb2.Exit, 1, "db"),
    ]
    (ref,) = segment.spans[0].refs  # its parent is in another process
    assert (ref.refType, ref.traceId, ref.parentService, ref.networkAddressUsedAtPeer) == (
        tracing_pb2.CrossProcess, TRACE.hex(), "", "web:80",
    )  # fmt: skip


def test_the_peer_of_an_exit_is_its_peer_service_else_the_address_it_used() -> None:
    assert peer_of({"peer.service": "orders", "server.address": "10.0.0.1"}) == "orders"
    assert peer_of({"server.address": "10.0.0.1", "server.port": "8080"}) == "10.0.0.1:8080"
    assert peer_of({"net.peer.name": "db", "net.peer.port": "5432"}) == "db:5432"
    assert peer_of({}) == ""


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def grouped(service: str, name: str) -> str:
    """An endpoint guard: /checkout/<id> is grouped."""
    return "GET /checkout/{id}" if name.startswith("GET /checkout/") else name


def relations(taken: list[Any]) -> dict[str, tuple[int, int, int]]:
    return {
        f"{m.MODEL}: {m.entity().replace(SEP, ' ')}": (m.calls, m.errors, m.latency_sum_ms) for m in taken
    }


CALL = Call(202611231000, 20, True, 10)


def test_an_entry_waits_for_its_parent_and_the_entry_that_parent_was_made_in() -> None:
    taken: list[Any] = []
    callers = Callers(taken.extend, grouped, Instruments(), wait_s=10.0, clock=Clock())
    served = span(5, "GET /orders/{id}", SERVER, parent=2)
    callers.add("orders", "orders-1", [served])
    callers.wait([(served.parent_span_id, "orders", "orders-1", "GET /orders/{id}", CALL)])
    callers.settle()
    assert taken == []  # its parent has not come
    callers.add("shop", "shop-1", [span(2, "GET", CLIENT, parent=1)])
    callers.settle()
    assert taken == []  # the parent came, the entry it was made in has not
    callers.add("shop", "shop-1", [span(1, "GET /checkout/17", SERVER)])
    callers.settle()
    # The caller's endpoint is guarded as the caller's own segment was: grouped.
    assert relations(taken) == {
        "service_relation_metrics: shop orders server": (1, 1, 20),
        "service_instance_relation_metrics: shop shop-1 orders orders-1": (1, 1, 20),
        "endpoint_relation_metrics: shop GET /checkout/{id} orders GET /orders/{id}": (1, 1, 20),
    }
    callers.settle()
    assert len(taken) == 3  # counted once


def test_a_call_to_its_own_service_counts_only_from_an_exit_span() -> None:
    taken: list[Any] = []
    callers = Callers(taken.extend, grouped, Instruments(), wait_s=10.0, clock=Clock())
    callers.add("shop", "shop-1", [span(1, "GET /a", SERVER), span(2, "GET", CLIENT, parent=1),
                                   span(3, "work", INTERNAL, parent=1)])  # fmt: skip
    callers.wait([((2).to_bytes(8, "big"), "shop", "shop-1", "GET /b", CALL)])  # shop called itself
    callers.wait([((3).to_bytes(8, "big"), "shop", "shop-1", "GET /c", CALL)])  # a nested entry, no call
    callers.settle()
    assert relations(taken) == {
        "service_relation_metrics: shop shop server": (1, 1, 20),
        "service_instance_relation_metrics: shop shop-1 shop shop-1": (1, 1, 20),
        "endpoint_relation_metrics: shop GET /a shop GET /b": (1, 1, 20),
    }


def test_an_entry_whose_parent_never_comes_counts_no_relation_after_the_wait() -> None:
    taken: list[Any] = []
    clock = Clock()
    instruments = Instruments()
    callers = Callers(taken.extend, grouped, instruments, wait_s=10.0, clock=clock)
    callers.wait([((7).to_bytes(8, "big"), "orders", "orders-1", "GET /x", CALL)])
    clock.now = 9.9
    callers.settle()
    assert instruments.value("skyoap_otlp_unknown_callers_total") == 0
    clock.now = 10.0
    callers.settle()
    assert taken == []
    assert instruments.value("skyoap_otlp_unknown_callers_total") == 1
    # A parent that is known by then, whose entry is not, names the furthest span known.
    callers.add("shop", "shop-1", [span(2, "GET", CLIENT, parent=1)])
    callers.wait([((2).to_bytes(8, "big"), "orders", "orders-1", "GET /x", CALL)])
    clock.now = 20.0
    callers.settle()
    assert [(m.MODEL, m.entity().replace(SEP, " ")) for m in taken][-1] == (
        "endpoint_relation_metrics", "shop GET orders GET /x",
    )  # fmt: skip
    # What still waits at close is settled then: counted, or dropped and counted.
    callers.wait([((9).to_bytes(8, "big"), "orders", "orders-1", "GET /x", CALL)])
    callers.close()
    assert instruments.value("skyoap_otlp_unknown_callers_total") == 2


def test_a_reference_naming_a_caller_instance_no_name_could_be_is_refused() -> None:
    """The caller's instance in a reference makes instance relations, so it is
    checked as every name is (SkyWalking's agents send it; OTLP's never do)."""
    limits = NodeConfig().limits.items()
    ref = SpanRef(0, "shop", "shop-1\x1fX", "GET /a", "orders:80")
    segment = Segment("t", "s", "orders", "orders-1",
                      (Span(0, 3, 1_000, 1_020, "GET /b", "", False, False, (ref,), 0),), b"")  # fmt: skip
    with pytest.raises(Refused) as refused:
        SegmentRules(limits).check(segment, 1_000)
    assert refused.value.reason is Reason.CONTROL_CHARACTER
    assert "parentServiceInstance" in str(refused.value)
