"""A request is weighed before it is decoded: its size against its method's
limit, and what decoding it can cost against the room left in the node's
memory budget (in-process server, port 0)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from skyoap.edge.decoding import MESSAGE_COST, PACKED_BYTE_COST, STRING_COST, WIRE_BYTE_COST, DecodeCost
from skyoap.edge.server import GrpcServer
from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.proto import register_pb2, register_pb2_grpc, remote_pb2
from skyoap.proto.skywalking import tracing_pb2
from skyoap.receiver.skywalking import segment_of
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments


def empty_spans(n: int) -> bytes:
    segment = tracing_pb2.SegmentObject(traceSegmentId="s")
    for _ in range(n):
        segment.spans.add()
    return segment.SerializeToString()


def test_the_cost_counts_every_element_decoding_allocates() -> None:
    data = empty_spans(1000)  # "s" (3 bytes), then 1,000 spans of two bytes each
    assert len(data) == 2003
    # The id's tag is the byte a log's data starts with, so it is counted too:
    # the count can only be too high.
    assert DecodeCost(tracing_pb2.SegmentObject).of(data) == 2003 * WIRE_BYTE_COST + 1001 * MESSAGE_COST
    # Tags and references sit inside spans: every level is counted.
    segment = tracing_pb2.SegmentObject()
    span = segment.spans.add()
    for _ in range(10):
        span.tags.add()
        span.refs.add()
    data = segment.SerializeToString()
    assert DecodeCost(tracing_pb2.SegmentObject).of(data) == len(data) * WIRE_BYTE_COST + 21 * MESSAGE_COST
    # Repeated strings are counted one by one; packed numbers widen to 8 bytes.
    batch = remote_pb2.RemoteBatch(strings=["", ""], longs=[1, 2, 3]).SerializeToString()
    assert DecodeCost(remote_pb2.RemoteBatch).of(batch) == len(batch) * PACKED_BYTE_COST + 2 * STRING_COST


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def doServiceRegister(
        self, request: object, context: grpc.ServicerContext
    ) -> register_pb2.ServiceRegisterMapping:
        self.calls += 1
        return register_pb2.ServiceRegisterMapping()


@pytest.fixture
def served() -> Iterator[tuple[Counting, register_pb2_grpc.RegisterStub, MemoryBudget]]:
    budget = MemoryBudget(100_000, Instruments())
    server = GrpcServer(
        "127.0.0.1", 0, max_message_bytes=1 << 20, call_deadline_s=0.2, budget=budget,
        max_control_message_bytes=50_000,
    )  # fmt: skip
    servicer = Counting()
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], servicer, control=True)
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield servicer, register_pb2_grpc.RegisterStub(channel), budget
    server.close(0)


def refusal(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code(), info.value.details()


def test_a_request_past_its_methods_limit_is_refused_undecoded(
    served: tuple[Counting, register_pb2_grpc.RegisterStub, MemoryBudget],
) -> None:
    servicer, stub, budget = served
    huge_name = register_pb2.Services(services=[register_pb2.Service(serviceName="x" * 60_000)])
    code, details = refusal(lambda: stub.doServiceRegister(huge_name, timeout=10))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert details == (
        "a request of 60008 bytes is more than the 50000 bytes skyoap.v1.Register.doServiceRegister takes; "
        "send less per message"
    )
    assert servicer.calls == 0
    assert budget.held() == 0


def test_a_request_is_decoded_only_once_its_cost_fits_in_what_is_left(
    served: tuple[Counting, register_pb2_grpc.RegisterStub, MemoryBudget],
) -> None:
    servicer, stub, budget = served
    # 400 empty services: 800 bytes on the wire (3 x 800 held), 400 x 128 bytes once decoded.
    many = register_pb2.Services(services=[register_pb2.Service() for _ in range(400)])
    stub.doServiceRegister(many, timeout=10)
    assert (servicer.calls, budget.held()) == (1, 0)  # reserved while it was served, then freed
    budget.add(60_000)  # 40,000 bytes left: less than the 53,600 decoding needs
    code, details = refusal(lambda: stub.doServiceRegister(many, timeout=10))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the node holds 60000 bytes of telemetry, and 53600 more would pass its memory budget" in details
    assert servicer.calls == 1
    budget.add(-60_000)
    stub.doServiceRegister(many, timeout=10)
    assert servicer.calls == 2


LIMITS = TelemetryLimits(
    max_name_length=500, max_past_ms=1, max_future_ms=1, max_properties_chars=1, max_spans_per_segment=10,
    max_refs_per_span=3, max_tags_per_item=1, max_log_body_bytes=1, max_histogram_buckets=1,
)  # fmt: skip


def test_spans_and_references_are_counted_before_any_becomes_an_object() -> None:
    with pytest.raises(Refused, match=r"spans of segment s.*11.*--max-spans-per-segment") as info:
        segment_of(tracing_pb2.SegmentObject.FromString(empty_spans(11)), LIMITS)
    assert info.value.reason is Reason.OVER_LIMIT
    segment = tracing_pb2.SegmentObject(traceSegmentId="s")
    segment.spans.add()
    segment.spans.add().refs.extend([tracing_pb2.SegmentReference()] * 4)
    with pytest.raises(Refused, match=r"references of a span of segment s.*4.*--max-refs-per-span"):
        segment_of(segment, LIMITS)
    assert len(segment_of(tracing_pb2.SegmentObject.FromString(empty_spans(10)), LIMITS).spans) == 10
