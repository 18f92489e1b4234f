"""A gRPC server whose Register handlers do nothing: the ceiling the registration
benchmark compares the real node with. Same server, same request decoding; the
answer to doServiceRegister is a canned one of the size a real answer has
(``--answer-names`` names with their ids), so both runs move the same bytes."""

from __future__ import annotations

import argparse

import grpc

from bench.serving import serve_until_terminated
from skyoap.edge.server import GrpcServer
from skyoap.proto import register_pb2
from skyoap.receiver.wire import key_int_pairs


class EmptyRegister:
    def __init__(self, answer_names: int) -> None:
        self._answer = key_int_pairs(1, [(f"bench-service-{i:05d}", 10_000 + i) for i in range(answer_names)])

    def doServiceRegister(self, request: object, context: grpc.ServicerContext) -> bytes:
        return self._answer

    def doServiceInstanceRegister(self, request: object, context: grpc.ServicerContext) -> object:
        return register_pb2.ServiceInstanceRegisterMapping()

    def doEndpointRegister(self, request: object, context: grpc.ServicerContext) -> object:
        return register_pb2.EndpointMapping()

    def doNetworkAddressRegister(self, request: object, context: grpc.ServicerContext) -> object:
        return register_pb2.NetAddressMapping()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--answer-names", type=int, default=100)
    args = parser.parse_args()
    server = GrpcServer("127.0.0.1", args.port, max_message_bytes=4 * 1024 * 1024)
    server.add(register_pb2.DESCRIPTOR.services_by_name["Register"], EmptyRegister(args.answer_names))
    serve_until_terminated(server, "empty server")


if __name__ == "__main__":
    main()
