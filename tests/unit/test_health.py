"""Health checking answers as grpc.health.v1 says while keeping nothing a
client names and bounding its watches (in-process server, port 0)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skyoap.edge.limits import CallLimits
from skyoap.edge.server import GrpcServer
from skyoap.proto import register_pb2
from tests.integration.helpers import eventually

SERVING = health_pb2.HealthCheckResponse.SERVING
REGISTER = "skyoap.v1.Register"


class Nothing:
    pass


@pytest.fixture
def served() -> Iterator[tuple[GrpcServer, health_pb2_grpc.HealthStub]]:
    server = GrpcServer(
        "127.0.0.1",
        0,
        max_message_bytes=4 << 20,
        limits=CallLimits(max_calls=3, stream_idle_s=60.0, stream_max_age_s=2.0),
    )
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], Nothing())
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield server, health_pb2_grpc.HealthStub(channel)
    server.close(0)


def check(stub: health_pb2_grpc.HealthStub, service: str) -> object:
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status


def test_check_answers_for_the_node_and_its_services_and_not_found_for_others(
    served: tuple[GrpcServer, health_pb2_grpc.HealthStub],
) -> None:
    _, stub = served
    assert (check(stub, ""), check(stub, REGISTER)) == (SERVING, SERVING)
    with pytest.raises(grpc.RpcError) as unknown:
        check(stub, "x" * (1 << 20))
    assert (unknown.value.code(), unknown.value.details()) == (
        grpc.StatusCode.NOT_FOUND,
        "the node serves no service of that name",
    )


def test_watches_hear_changes_are_bounded_and_end_once_old(
    served: tuple[GrpcServer, health_pb2_grpc.HealthStub],
) -> None:
    server, stub = served
    known = stub.Watch(health_pb2.HealthCheckRequest(service=REGISTER), timeout=30)
    unknown = stub.Watch(health_pb2.HealthCheckRequest(service="x" * (1 << 20)), timeout=30)
    overall = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
    assert next(known).status == SERVING
    assert next(unknown).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
    assert next(overall).status == SERVING
    assert server.health.watches == 3

    # Past the bound (here 3), a watch is refused at once; a check still answers.
    with pytest.raises(grpc.RpcError) as refused:
        next(stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=30))
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert check(stub, "") == SERVING

    server.refuse()
    assert next(known).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert next(overall).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert check(stub, REGISTER) == health_pb2.HealthCheckResponse.NOT_SERVING

    # Each is closed once 2 s old (--stream-max-age-s), and leaves nothing behind.
    for watch in (known, unknown, overall):
        with pytest.raises(grpc.RpcError) as closed:
            next(watch)
        assert closed.value.code() is grpc.StatusCode.CANCELLED
    eventually(lambda: server.health.watches == 0)  # as each call's end reaches the server


def test_a_request_that_does_not_decode_is_refused_with_what_was_wrong(
    served: tuple[GrpcServer, health_pb2_grpc.HealthStub],
) -> None:
    server, stub = served
    not_utf8 = b"\x0a\x02\xff\xfe"  # field 1 (service): 2 bytes that are not UTF-8
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        calls = [
            lambda: channel.unary_unary("/grpc.health.v1.Health/Check")(not_utf8, timeout=10),
            lambda: next(channel.unary_stream("/grpc.health.v1.Health/Watch")(not_utf8, timeout=10)),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as refused:
                call()
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "the request is not a valid grpc.health.v1.HealthCheckRequest message "
                "(String field had bad UTF-8); strings must be UTF-8",
            )
    assert check(stub, "") == SERVING
