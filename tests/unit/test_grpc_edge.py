"""The gRPC edge maps the project's errors to statuses and bounds each call by its
deadline (in-process server, port 0)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from skyoap.edge.binding import _deadline_once_received
from skyoap.edge.errors import InvalidRequest
from skyoap.edge.server import GrpcServer
from skyoap.proto import register_pb2, register_pb2_grpc, remote_pb2
from skyoap.runtime import deadline
from skyoap.runtime.budget import MemoryBudget, Overloaded
from skyoap.runtime.buffer import BufferClosed, BufferFull, BufferQueue, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import StorageError, StorageUnavailable
from skyoap.storage.elasticsearch.client import DeadlineReads, ElasticsearchClient


class Failing:
    def __init__(self) -> None:
        self.error: Exception = RuntimeError()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def fail(request: object, context: grpc.ServicerContext) -> None:
            raise self.error

        return fail


@pytest.fixture
def served() -> Iterator[tuple[Failing, register_pb2_grpc.RegisterStub]]:
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 20)
    servicer = Failing()
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], servicer)
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield servicer, register_pb2_grpc.RegisterStub(channel)
    server.close(0)


@pytest.mark.parametrize(
    ("error", "code", "details"),
    [
        (InvalidRequest("name #0 is empty"), grpc.StatusCode.INVALID_ARGUMENT, "name #0 is empty"),
        (
            StorageUnavailable("Elasticsearch is unreachable"),
            grpc.StatusCode.UNAVAILABLE,
            "storage is unavailable, try again later: Elasticsearch is unreachable",
        ),
        (StorageError("mapping refused"), grpc.StatusCode.INTERNAL, "the backend failed to handle the call"),
        (
            BufferFull("buffer queue q stayed full for 5 s"),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "the node is overloaded (buffer queue q stayed full for 5 s); try again later",
        ),
        (BufferClosed("closed"), grpc.StatusCode.UNAVAILABLE, "the node is shutting down"),
        (KeyError("bug"), grpc.StatusCode.INTERNAL, "the backend failed to handle the call: 'bug'"),
    ],
)
def test_errors_become_statuses(
    served: tuple[Failing, register_pb2_grpc.RegisterStub],
    error: Exception,
    code: grpc.StatusCode,
    details: str,
) -> None:
    servicer, stub = served
    servicer.error = error
    with pytest.raises(grpc.RpcError) as info:
        stub.doServiceRegister(register_pb2.Services(), timeout=5)
    assert info.value.code() is code
    assert details in info.value.details()


def test_a_stream_message_that_does_not_decode_ends_the_call_with_invalid_argument() -> None:
    taken: list[object] = []

    class Remote:
        def call(self, requests: Iterator[object], context: grpc.ServicerContext) -> remote_pb2.RemoteAck:
            taken.extend(requests)
            return remote_pb2.RemoteAck(received=len(taken))

    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 20)
    server.add(remote_pb2.DESCRIPTOR.services_by_name["RemoteService"], Remote())
    server.start()
    good = remote_pb2.RemoteMessage(nextWorkerId=19, streamDataId=1).SerializeToString()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.stream_unary("/skyoap.v1.RemoteService/call")
            with pytest.raises(grpc.RpcError) as info:
                call(iter([good, b"\xff\xff"]), timeout=5)
    finally:
        server.close(0)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid skyoap.v1.RemoteMessage message" in info.value.details()
    assert len(taken) == 1


def test_every_wait_of_a_call_ends_by_the_call_deadline() -> None:
    """A handler that waits twice, each wait allowed an hour: the first wait
    ends at the call's deadline (0.2 s), and the call is answered
    RESOURCE_EXHAUSTED. Without the call's deadline it would wait an hour."""
    instruments = Instruments()
    budget = MemoryBudget(1000, instruments)
    budget.add(1000)  # full
    queue: BufferQueue[int] = BufferQueue("q", 1, 1, BufferStrategy.BLOCKING, instruments, max_wait_s=3600)
    queue.produce(0)  # full
    reached: list[str] = []

    class Waiting:
        def doServiceRegister(self, request: object, context: grpc.ServicerContext) -> None:
            for name, wait in (("queue", lambda: queue.produce(1)), ("budget", budget_wait)):
                try:
                    wait()
                except Overloaded:
                    reached.append(name)
            raise Overloaded("no room")

    def budget_wait() -> None:
        with budget.admission(10, wait_s=3600):
            pass

    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 20, call_deadline_s=0.2)
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], Waiting())
    server.start()
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
            pytest.raises(grpc.RpcError) as info,
        ):
            register_pb2_grpc.RegisterStub(channel).doServiceRegister(register_pb2.Services(), timeout=60)
    finally:
        server.close(0)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reached == ["queue", "budget"]
    assert deadline.remaining(7.0) == 7.0  # outside a call, waits keep their own limits


def test_a_streamed_call_has_its_deadline_from_its_last_message_on() -> None:
    with deadline.call():
        requests = _deadline_once_received(iter([1, 2]), 0.0)
        assert next(requests) == 1
        assert deadline.remaining(9.0) == 9.0  # still coming in: no deadline yet
        assert list(requests) == [2]
        assert deadline.remaining(9.0) == 0.0
    assert deadline.remaining(9.0) == 9.0


def test_edge_reads_of_elasticsearch_are_not_sent_once_the_deadline_passed() -> None:
    reads = DeadlineReads(ElasticsearchClient("http://127.0.0.1:9", "p"), 5.0)
    with deadline.call():
        deadline.start(0.0)
        with pytest.raises(StorageUnavailable, match="the call's deadline passed before Elasticsearch"):
            reads.es().mget(index="p_x", ids=["a"])
