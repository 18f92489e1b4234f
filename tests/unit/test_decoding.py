"""A request is weighed before it is decoded: its size against its method's
limit, and what decoding it can cost against the room left in the node's
memory budget (in-process server, port 0)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor, message, message_factory

from skyoap.edge.decoding import (
    ELEMENT_OVERHEAD,
    PACKED_BYTE_COST,
    STRING_COST,
    WIRE_BYTE_COST,
    DecodeCost,
    message_cost,
)
from skyoap.edge.server import GrpcServer
from skyoap.model.checks import Reason, Refused, TelemetryLimits
from skyoap.model.spans import SegmentRules
from skyoap.proto import ping_pb2, register_pb2, register_pb2_grpc, remote_pb2
from skyoap.proto.otlp import logs_service_pb2, metrics_service_pb2, trace_service_pb2
from skyoap.proto.skywalking import (
    common_pb2,
    configuration_pb2,
    logging_pb2,
    management_pb2,
    meter_pb2,
    profile_pb2,
    tracing_pb2,
)
from skyoap.receiver.traces import segment_of
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.malloc import AllocatorState, allocator_bytes
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node


def empty_spans(n: int) -> bytes:
    segment = tracing_pb2.SegmentObject(traceSegmentId="s")
    for _ in range(n):
        segment.spans.add()
    return segment.SerializeToString()


def test_the_cost_counts_every_element_decoding_allocates() -> None:
    data = empty_spans(1000)  # "s" (3 bytes), then 1,000 spans of two bytes each
    assert len(data) == 2003
    # An element costs its message's fields' slots: 14 fields of a span, 8 of
    # a reference (2 numbers and 6 strings), 2 strings of a tag.
    kinds = (tracing_pb2.SpanObject, tracing_pb2.SegmentReference, common_pb2.KeyStringValuePair)
    span, ref, tag = (message_cost(t.DESCRIPTOR) for t in kinds)
    assert (span, ref, tag) == (ELEMENT_OVERHEAD + 94, ELEMENT_OVERHEAD + 104, ELEMENT_OVERHEAD + 32)
    # The id's tag is the byte a log's data (tags) starts with, so it is
    # counted too: the count can only be too high.
    assert DecodeCost(tracing_pb2.SegmentObject).of(data) == 2003 * WIRE_BYTE_COST + 1000 * span + tag
    # Tags and references sit inside spans: every level is counted.
    segment = tracing_pb2.SegmentObject()
    one = segment.spans.add()
    for _ in range(10):
        one.tags.add()
        one.refs.add()
    data = segment.SerializeToString()
    expected = len(data) * WIRE_BYTE_COST + span + 10 * tag + 10 * ref
    assert DecodeCost(tracing_pb2.SegmentObject).of(data) == expected
    # Repeated strings are counted one by one; packed numbers widen to 8 bytes.
    batch = remote_pb2.RemoteBatch(strings=["", ""], longs=[1, 2, 3]).SerializeToString()
    assert DecodeCost(remote_pb2.RemoteBatch).of(batch) == len(batch) * PACKED_BYTE_COST + 2 * STRING_COST


SERVED = (
    tracing_pb2, logging_pb2, meter_pb2, management_pb2, profile_pb2, configuration_pb2,
    trace_service_pb2, logs_service_pb2, metrics_service_pb2, remote_pb2, register_pb2, ping_pb2,
)  # fmt: skip
"""The protocols whose requests a node decodes."""
FD = descriptor.FieldDescriptor


def repeated_messages(root: descriptor.Descriptor) -> list[FieldPath]:
    """A path from ``root`` to each repeated message field under it."""
    paths: dict[tuple[str, str], FieldPath] = {}
    todo: list[tuple[descriptor.Descriptor, FieldPath]] = [(root, ())]
    seen = {root.full_name}
    while todo:
        m, path = todo.pop(0)
        for f in m.fields:
            sub = f.message_type
            if f.type != FD.TYPE_MESSAGE or sub is None:
                continue
            if f.is_repeated:
                paths.setdefault((m.full_name, f.name), (*path, f))
            if sub.full_name not in seen:
                seen.add(sub.full_name)
                todo.append((sub, (*path, f)))
    return list(paths.values())


FieldPath = tuple[descriptor.FieldDescriptor, ...]


def dense(cls: type[message.Message], path: FieldPath, n: int, spread: bool) -> bytes:
    """A request of ``n`` empty elements of the field at the end of ``path``:
    all in one array, or (``spread``) one in each of ``n`` parents, where the
    field's parent is repeated too."""
    request = cls()

    def step(m: Any, f: descriptor.FieldDescriptor) -> Any:
        if f.is_repeated:
            return getattr(m, f.name).add()
        sub = getattr(m, f.name)
        sub.SetInParent()
        return sub

    parents = [i for i, f in enumerate(path[:-1]) if f.is_repeated]
    if spread and parents:
        at = request
        for f in path[: parents[-1]]:
            at = step(at, f)
        for _ in range(n):
            one = at
            for f in path[parents[-1] : -1]:
                one = step(one, f)
            getattr(one, path[-1].name).add()
    else:
        at = request
        for f in path[:-1]:
            at = step(at, f)
        for _ in range(n):
            getattr(at, path[-1].name).add()
    return request.SerializeToString()


def allocated() -> int:
    held = allocator_bytes()
    assert held is not None, "the C library does not say what it holds"
    return held[AllocatorState.IN_USE] + held[AllocatorState.MAPPED]


def test_the_cost_bounds_what_decoding_allocates_for_every_repeated_field_the_node_decodes() -> None:
    """Measured, as the C allocator counts it: every shape of empty elements
    (the densest a request can be) of every request type the node serves."""
    requests = {
        m.input_type.full_name: m.input_type
        for module in SERVED
        for service in module.DESCRIPTOR.services_by_name.values()
        for m in service.methods
    }
    over: list[str] = []
    shapes = 0
    for root in requests.values():
        cls = message_factory.GetMessageClass(root)
        cost = DecodeCost(cls)
        for path in repeated_messages(root):
            for spread in (False, True):
                data = dense(cls, path, 20_000, spread)
                gc.collect()
                before = allocated()
                decoded = cls.FromString(data)
                took = allocated() - before
                del decoded
                shapes += 1
                if took > cost.of(data):
                    over.append(f"{root.name} {'.'.join(f.name for f in path)}: {took} > {cost.of(data)}")
    assert shapes > 50
    assert over == [], "\n".join(over)


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
    # 400 empty services: 800 bytes on the wire (3 x 800 held), 400 x 88 bytes once decoded.
    many = register_pb2.Services(services=[register_pb2.Service() for _ in range(400)])
    stub.doServiceRegister(many, timeout=10)
    assert (servicer.calls, budget.held()) == (1, 0)  # reserved while it was served, then freed
    budget.add(70_000)  # 30,000 bytes left: less than the 37,600 decoding needs
    code, details = refusal(lambda: stub.doServiceRegister(many, timeout=10))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the node holds 70000 bytes of telemetry, and 37600 more would pass its memory budget" in details
    assert servicer.calls == 1
    budget.add(-70_000)
    stub.doServiceRegister(many, timeout=10)
    assert servicer.calls == 2


RULES = SegmentRules(TelemetryLimits(
    max_name_length=500, max_past_ms=1, max_future_ms=1, max_properties_chars=1, max_spans_per_segment=10,
    max_refs_per_span=3, max_tags_per_item=1, max_log_body_bytes=1, max_histogram_buckets=1,
))  # fmt: skip


def test_spans_and_references_are_counted_before_any_becomes_an_object() -> None:
    with pytest.raises(Refused, match=r"spans of segment s.*11.*--max-spans-per-segment") as info:
        segment_of(tracing_pb2.SegmentObject.FromString(empty_spans(11)), RULES)
    assert info.value.reason is Reason.OVER_LIMIT
    segment = tracing_pb2.SegmentObject(traceSegmentId="s")
    segment.spans.add()
    segment.spans.add().refs.extend([tracing_pb2.SegmentReference()] * 4)
    with pytest.raises(Refused, match=r"references of a span of segment s.*4.*--max-refs-per-span"):
        segment_of(segment, RULES)
    assert len(segment_of(tracing_pb2.SegmentObject.FromString(empty_spans(10)), RULES).spans) == 10


def decoded_segments() -> int:
    """The segment messages alive in this process."""
    kinds = (tracing_pb2.SegmentObject, tracing_pb2.SegmentCollection)
    return sum(isinstance(o, kinds) for o in gc.get_objects())


def test_a_refused_call_leaves_nothing_it_decoded_alive_without_the_collector(tmp_path: Path) -> None:
    """The budget lets go of what a call reserved when the call ends; what it
    decoded must be freed by then, not when the cyclic collector next runs."""
    config = NodeConfig().with_options(
        host="127.0.0.1", port=0, admin_port=0, query_port=0, embedded_path=str(tmp_path / "skyoap.db")
    )
    node = Node(config).start()
    too_many = empty_spans(3000)  # past --max-spans-per-segment (2,000)
    in_a_collection = tracing_pb2.SegmentCollection(
        segments=[tracing_pb2.SegmentObject.FromString(too_many)]
    ).SerializeToString()
    gc.collect()  # what earlier tests left in cycles is not this call's
    gc.disable()
    try:
        with grpc.insecure_channel(node.address) as channel:
            raw = {"request_serializer": bytes, "response_deserializer": common_pb2.Commands.FromString}
            service = "/skywalking.v3.TraceSegmentReportService"
            in_sync = channel.unary_unary(f"{service}/collectInSync", **raw)
            stream = channel.stream_unary(f"{service}/collect", **raw)
            for call in (lambda: in_sync(in_a_collection, timeout=30),
                         lambda: stream(iter([too_many, too_many]), timeout=30)):  # fmt: skip
                code, details = refusal(call)
                assert code is grpc.StatusCode.INVALID_ARGUMENT, details
        # Answered: the call's thread may still be unwinding it.
        deadline = time.monotonic() + 30
        while decoded_segments() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert decoded_segments() == 0
        assert node.budget.held() == 0
    finally:
        gc.enable()
        node.close(5)
