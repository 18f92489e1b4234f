"""The gRPC edge maps the project's errors to statuses (in-process server, port 0)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from edge.errors import InvalidRequest
from edge.server import GrpcServer
from proto import register_pb2, register_pb2_grpc, remote_pb2
from runtime.buffer import BufferClosed, BufferFull
from storage.api import StorageError, StorageUnavailable


class Failing:
    def __init__(self) -> None:
        self.error: Exception = RuntimeError()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def fail(request: object, context: grpc.ServicerContext) -> None:
            raise self.error

        return fail


@pytest.fixture
def served() -> Iterator[tuple[Failing, register_pb2_grpc.RegisterStub]]:
    server = GrpcServer("127.0.0.1", 0, workers=2, max_message_bytes=1 << 20)
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

    server = GrpcServer("127.0.0.1", 0, workers=2, max_message_bytes=1 << 20)
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
